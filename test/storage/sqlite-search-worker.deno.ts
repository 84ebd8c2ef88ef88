/**
 * Run by sqlite-search-worker.test.ts under Deno, on the SQLite file given as
 * the first argument (its schema and one definition written by Node): the
 * search pool's worker runs `node:sqlite` while this thread reads on its own
 * connection. Prints one JSON line of what it saw.
 */
import { Buffer } from "node:buffer";
import process from "node:process";
import { SEARCH_ALIVE } from "../../src/storage/queries/sql-functions.js";
import { sqliteDriver } from "../../src/storage/run/sqlite-client.js";
import { createSqliteSearchPool } from "../../src/storage/run/sqlite-search-worker.js";

const [filename] = process.argv.slice(2);
if (filename === undefined) throw new Error("usage: sqlite-search-worker.deno.ts <sqlite file>");
const slow =
  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT COUNT(*) AS total FROM c";
// node:sqlite under Deno (sqlite-client.ts).
const Database = sqliteDriver();
const main = new Database(filename, { readonly: true });

const unlimited = createSqliteSearchPool(filename, { workers: 1, timeoutMs: 0 });
const limited = createSqliteSearchPool(filename, { workers: 1, timeoutMs: 100 });
// Its own worker: the one of `limited` still counts the slow statement it was answered for.
const stopping = createSqliteSearchPool(filename, { workers: 1, timeoutMs: 100 });
try {
  // Warm the worker up, so the slow statement below is running while this thread reads.
  await unlimited.run("SELECT 1 AS one", []);
  let settled = false;
  const search = unlimited.run(slow, [20_000_000]).finally(() => {
    settled = true;
  });
  // A turn of the event loop, then a read on the main connection: answered while the statement runs.
  await new Promise((resolve) => setTimeout(resolve, 10));
  main.prepare("SELECT id FROM agent_definitions").all([]);
  const readAnsweredFirst = !settled;
  const [{ total: slowTotal }] = (await search) as [{ total: number }];

  const timedOut = await limited.run(slow, [20_000_000]).then(
    () => "answered",
    (error: Error) => error.name,
  );
  const leaving = new AbortController();
  const aborted = unlimited.run(slow, [20_000_000], leaving.signal).then(
    () => "answered",
    (error: Error) => error.message,
  );
  setTimeout(() => leaving.abort(new Error("gone")), 10);
  const next = await unlimited.run("SELECT COUNT(*) AS total FROM agent_definitions", []);
  // A statement with the cancellation point is stopped at its limit: the one worker answers the next.
  const endless =
    `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE ${SEARCH_ALIVE}() AND x < ` +
    `?) SELECT COUNT(*) AS total FROM c`;
  await stopping.run("SELECT 1 AS one", []);
  const endlessStopped = await stopping.run(endless, [1e15]).then(
    () => "answered",
    (error: Error) => error.name,
  );
  const afterStop = await stopping.run("SELECT 1 AS one", []);
  const [row] = (await unlimited.run("SELECT CAST(document AS BLOB) AS json FROM agent_definitions", [])) as [
    { json: unknown },
  ];
  console.log(
    JSON.stringify({
      deno: "Deno" in globalThis,
      readAnsweredFirst,
      slowTotal,
      timedOut,
      aborted: await aborted,
      next,
      endlessStopped,
      afterStop,
      bytes: Buffer.isBuffer(row.json),
    }),
  );
} finally {
  await unlimited.close();
  await limited.close();
  await stopping.close();
  main.close();
}
