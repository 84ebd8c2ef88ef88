/**
 * Large writes at once, in a process with the production heap (`npm start`'s
 * --max-old-space-size=128), on MariaDB (issue 50, item 3): four POSTs of
 * ~950 KB of distinct words each (86,000 term rows) ended the process (V8
 * "reached heap limit", 3 of 3). Writes are now admitted against
 * MAX_BUFFERED_WRITE_BYTES. MAX_TERMS_PER_DEFINITION is raised here so that
 * each write does the work it did then; at its default such a body is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { distinctWordsDefinition } from "../support/distinct-words.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import { PRODUCTION_NODE_FLAGS, type ServerProcess } from "../support/server-process.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb")!;

describe.skipIf(mariadb.skip)("on mariadb, with npm start's heap", () => {
  let database: FreshDatabase;
  let server: ReachableServer & ServerProcess;

  beforeAll(async () => {
    database = await mariadb.create();
    server = await startServerProcess(database, { MAX_TERMS_PER_DEFINITION: "100000" }, "node", PRODUCTION_NODE_FLAGS);
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  it("four writes of 86,000 distinct words at once are all stored, and the process lives", async () => {
    const bodies = [0, 1, 2, 3].map((n) => JSON.stringify(distinctWordsDefinition(`Wordy ${n}`, n * 100_000, 86_000)));
    const statuses = await Promise.all(
      bodies.map(async (body) => {
        const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
          method: "POST",
          headers: { authorization: server.authorization, "content-type": "application/json" },
          body,
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(statuses).toEqual([201, 201, 201, 201]);
    expect(server.child.exitCode).toBeNull();
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    expect(server.stderr()).not.toContain("heap out of memory");
  }, 180_000);
});
