/**
 * MariaDB: the statements of a write that carry a definition go as prepared statements (run/writes.ts), their
 * document and binary encoding as bytes, not escaped into the statement's text and written as hex (issue 50:
 * 18-70 ms of the event loop per ~1 MB write); and a prepared statement's execution, its PREPARE included, is
 * held to the statement timeout as a query is (run/mysql-pool.ts).
 */
import { create } from "@bufbuild/protobuf";
import { createConnection } from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { SkillSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { type MysqlConnection, mysqlExecute, mysqlQuery, pooledConnections } from "../../src/storage/run/driver.js";
import { PREPARED_FROM_BYTES } from "../../src/storage/run/writes.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { createTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { definition, save } from "./fixtures.js";

const mariadb = testDatabases()[1]!;

describe.skipIf(mariadb.skip)("a write's document as a prepared statement's parameter, on MariaDB", () => {
  const target = useFreshDatabase(mariadb);

  async function withProxy(use: (proxy: TcpProxy, url: string) => Promise<void>): Promise<void> {
    const url = new URL(target().databaseUrl!);
    const proxy = await createTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
    try {
      await use(proxy, proxy.via(target().databaseUrl!));
    } finally {
      await proxy.close();
    }
  }

  it("sends a new and a replaced version's document, binary encoding and text as they are stored", async () => {
    await withProxy(async (proxy, databaseUrl) => {
      const repo = await createSqlRepository({ ...target(), databaseUrl });
      const admin = await createConnection(mysqlConnectionOptions(target().databaseUrl!));
      try {
        // Quotes, a backslash and 4-byte characters, what the text protocol escapes or must keep whole, in ten
        // skills past PREPARED_FROM_BYTES and 64 KiB together, so the statements that carry them (and the
        // full-text text written after COMMIT, search-text.ts) go prepared (run/writes.ts).
        const text = 'Files "expense" reports \\ ✓ 🧾 '.repeat(250);
        const large = (last: string) => {
          const def = definition({ name: "Prepared" });
          def.skills = [..."abcdefghij"].map((id) => create(SkillSchema, { id, name: id, description: text + last }));
          return def;
        };
        expect(text.length).toBeGreaterThan(PREPARED_FROM_BYTES / 3);
        const created = await save(repo, large("first"));
        const replaced = await save(repo, large("again"));
        expect(replaced.stored.id).toBe(created.stored.id);
        const [rows] = (await admin.query("SELECT document, document_binary FROM agent_definitions WHERE id = ?", [
          created.stored.id,
        ])) as unknown as [Array<{ document: Buffer; document_binary: Buffer }>];
        const [row] = rows;
        const document = row!.document;
        expect(document.toString("utf8")).toContain("🧾 again");
        const binary = row!.document_binary;
        const sent = proxy.sent();
        // As bytes: the document unescaped (its quotes would be \" in a statement's text), the binary as itself.
        expect(sent.some((bytes) => bytes.includes(document))).toBe(true);
        expect(sent.some((bytes) => bytes.includes(binary))).toBe(true);
        // Never as hex (X'...'), as the text protocol writes a Buffer.
        const hex = Buffer.from(binary.subarray(0, 64).toString("hex"));
        expect(sent.some((bytes) => bytes.includes(hex))).toBe(false);
        // The full-text text, whole: every skill's description, to its last word.
        await expect
          .poll(async () => {
            const [texts] = (await admin.query(
              "SELECT x.body FROM definition_text x JOIN agent_definitions d ON d.seq = x.seq WHERE d.id = ?",
              [created.stored.id],
            )) as unknown as [Array<{ body: string | Buffer }>];
            return String(texts[0]?.body ?? "").split("again").length - 1;
          })
          .toBe(10);
      } finally {
        await admin.end();
        await repo.close();
      }
    });
  });

  it("ends a prepared statement whose PREPARE or EXECUTE is never answered at the statement timeout", async () => {
    const value = Buffer.from("a value the test holds the answer after");
    // What the client sends that is held unanswered: the PREPARE (its SQL text), or the EXECUTE (the value).
    for (const heldAfter of ["SELECT LENGTH(?) AS held", value.toString()]) {
      await withProxy(async (proxy, databaseUrl) => {
        const database: Database = await openDatabase({ dataDir: target().dataDir, databaseUrl, timeoutMs: 500 });
        try {
          await pooledConnections(database.db)(async (pooled) => {
            const connection = pooled as MysqlConnection;
            const [row] = (await mysqlExecute(connection, "SELECT LENGTH(?) AS n", [value])) as Array<{ n: number }>;
            expect(row?.n).toBe(value.length);
            proxy.holdRepliesAfter(heldAfter);
            const started = performance.now();
            await expect(mysqlExecute(connection, "SELECT LENGTH(?) AS held", [value])).rejects.toMatchObject({
              code: "PROTOCOL_SEQUENCE_TIMEOUT",
            });
            const waited = performance.now() - started;
            expect(waited).toBeGreaterThan(400);
            expect(waited).toBeLessThan(3_000);
            // The socket was closed: nothing more waits on this connection, and the pool drops it.
            expect(connection.stream.destroyed).toBe(true);
            await expect(mysqlQuery(connection, "SELECT 1", [])).rejects.toBeDefined();
          });
        } finally {
          await database.db.destroy();
        }
      });
    }
  });
});
