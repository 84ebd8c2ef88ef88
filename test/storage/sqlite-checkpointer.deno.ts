/**
 * Run by sqlite-checkpointer.test.ts under Deno, on the SQLite file given as
 * the first argument: this thread writes ~8 MB on a connection that never
 * checkpoints (`node:sqlite`), the checkpointer's thread checkpoints it, and
 * close() ends the thread. Prints one JSON line of what it saw.
 */
import process from "node:process";
import { createSqliteCheckpointer } from "../../src/storage/run/sqlite-checkpointer.js";
import { sqliteDriver } from "../../src/storage/run/sqlite-client.js";

const [filename] = process.argv.slice(2);
if (filename === undefined) throw new Error("usage: sqlite-checkpointer.deno.ts <sqlite file>");
// node:sqlite under Deno (sqlite-client.ts).
const Database = sqliteDriver();
const db = new Database(filename);
db.pragma("journal_mode = WAL");
db.pragma("wal_autocheckpoint = 0");
db.prepare("CREATE TABLE blobs (b BLOB)").all([]);
const checkpointer = createSqliteCheckpointer(filename, 20);
let closeMs = 0;
try {
  for (let i = 0; i < 8; i++) {
    // The first starts the thread.
    await checkpointer.beforeWrite();
    db.prepare("INSERT INTO blobs VALUES (randomblob(1000000))").all([]);
  }
  const until = Date.now() + 20_000;
  while ((checkpointer.stats().last?.checkpointed ?? 0) < 1_500 && Date.now() < until)
    await new Promise((resolve) => setTimeout(resolve, 20));
} finally {
  const closing = performance.now();
  await checkpointer.close();
  closeMs = performance.now() - closing;
}
const { checkpoints, last } = checkpointer.stats();
db.close();
console.log(
  JSON.stringify({
    deno: "Deno" in globalThis,
    checkpointed: checkpoints > 0 && (last?.checkpointed ?? 0) >= 1_500,
    // The thread closes its connection and is ended at once (Deno's parentPort has no close()).
    closedAtOnce: closeMs < 2_000,
  }),
);
