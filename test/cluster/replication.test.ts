import { createConnection } from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { galeraSkipped, useGaleraDatabase } from "../support/galera.js";

/** The harness itself: the three nodes are one database. */
describe.skipIf(galeraSkipped())("the 3-node Galera test cluster", () => {
  const db = useGaleraDatabase();

  it("a row written through node 1 is read through nodes 2 and 3", async () => {
    await db().query(1, "CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(40) NOT NULL)");
    await db().query(1, "INSERT INTO notes (id, body) VALUES (1, 'written through node 1')");
    for (const n of [2, 3]) {
      const connection = await createConnection({ uri: db().url(n) });
      try {
        // The other nodes apply a commit shortly after it: a causal read waits until they have.
        await connection.query("SET SESSION wsrep_sync_wait = 1");
        const [rows] = await connection.query("SELECT id, body FROM notes");
        expect(rows, `through node ${n}`).toEqual([{ id: 1, body: "written through node 1" }]);
        const [[node]] = (await connection.query("SELECT @@wsrep_node_name AS name")) as unknown as [
          [{ name: string }],
        ];
        expect(node.name).toBe(`node${n}`);
      } finally {
        await connection.end();
      }
    }
  });
});
