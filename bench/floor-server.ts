/**
 * The floor: the least a server can do for the registry's operations. Plain
 * node:http and the database driver (mysql2, or better-sqlite3 for the
 * embedded database), no framework, no authentication, no validation. It
 * runs the service's SQL (the very statements of the service's reads, from
 * src/storage/queries/, answering the stored JSON bytes as they come; and
 * the upsert transaction with the same row locks, including the search index's
 * statements of search-index.ts) on the same tables, so each scenario can
 * report the service as a fraction of it.
 *
 * The only protobuf it touches is what the search index needs: the body is
 * read into an AgentDefinition (fromJson, unknown members ignored) so that the
 * service's own searchTermsOf and searchTextOf give the same side rows. A bare
 * server would have to pick those values out of the JSON as well; protobuf's
 * reader is the floor's one borrowed convenience, and it is charged to it.
 *
 *   GET  /floor/{tenant}/agentDefinition/{id}             (or an Agent_ID= reference)
 *   GET  /floor/{tenant}/agentDefinition?limit=&offset=
 *   POST /floor/{tenant}/agentDefinition          (create or update on name + provider + version)
 *
 * Run as its own process: `node --import tsx bench/floor-server.ts`, with
 * PORT, and DATABASE_URL (mysql://) or DATA_DIR (SQLite). Prints one JSON
 * line `{"message":"floor listening","port":N}` when ready.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fromJson, type JsonObject } from "@bufbuild/protobuf";
import { createPool, type Pool, type PoolConnection, type RowDataPacket } from "mysql2/promise";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { unfilteredQuery } from "../src/domain/list-query.js";
import { definitionIndexOf } from "../src/domain/search-terms.js";
import { readStatements } from "../src/storage/queries/reads.js";
import { buildSearch, defaultPageMaxBytes, inSearchOrder, type SearchRow } from "../src/storage/queries/search.js";
import { indexDefinition, keepTextsStatement } from "../src/storage/queries/search-index.js";
import { SEARCH_ALIVE } from "../src/storage/queries/sql-functions.js";
import { type WriteContext, writeStatements } from "../src/storage/queries/writes.js";
import type { Changed, WriteBinding } from "../src/storage/run/writes.js";

/** The few statements the floor needs, on either database. */
interface FloorDatabase {
  /** Rows of a read outside any transaction. */
  read(sql: string, params: unknown[]): Promise<Record<string, unknown>[]>;
  /**
   * Runs `work` in one transaction; `query` runs inside it and answers a statement's rows, or for
   * an INSERT or UPDATE one row with what it did (`insertId`, `affectedRows` on MySQL). Retries
   * deadlocks and duplicate-key races like the service.
   */
  transaction<T>(
    work: (query: (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>) => Promise<T>,
  ): Promise<T>;
}

function openMysql(url: URL): FloorDatabase {
  const pool: Pool = createPool({
    host: url.hostname,
    port: url.port === "" ? 3306 : Number(url.port),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: decodeURIComponent(url.pathname.slice(1)),
    charset: "utf8mb4",
    dateStrings: true,
    timezone: "Z",
    supportBigNumbers: true,
    // The service's pool size (knex: max 10).
    connectionLimit: 10,
  });
  // The service's session: strict mode, READ COMMITTED for writes (set once per connection here, per
  // transaction there).
  pool.pool.on("connection", (connection) => {
    // Queued on the connection ahead of any query the pool hands it out for.
    connection.query(
      "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES'), SESSION " +
        "innodb_lock_wait_timeout = 10, time_zone = '+00:00'",
    );
    connection.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  });
  const rows = (result: unknown): Record<string, unknown>[] =>
    Array.isArray(result) ? (result as RowDataPacket[]) : [result as Record<string, unknown>];
  return {
    async read(sql, params) {
      const [result] = await pool.query(sql, params);
      return rows(result);
    },
    async transaction(work) {
      for (let attempt = 1; ; attempt++) {
        const connection: PoolConnection = await pool.getConnection();
        try {
          await connection.beginTransaction();
          const result = await work(async (sql, params) => rows((await connection.query(sql, params))[0]));
          await connection.commit();
          return result;
        } catch (error) {
          await connection.rollback().catch(() => undefined);
          const code = (error as { code?: string }).code;
          if (attempt >= 8 || (code !== "ER_LOCK_DEADLOCK" && code !== "ER_DUP_ENTRY")) throw error;
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * 2 ** attempt));
        } finally {
          connection.release();
        }
      }
    },
  };
}

interface SqliteStatement {
  /** True for a statement that answers rows (a SELECT, or an UPDATE ... RETURNING). */
  readonly reader: boolean;
  all(...params: unknown[]): Record<string, unknown>[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  pragma(source: string): unknown;
  function(name: string, options: { deterministic: boolean }, fn: () => unknown): unknown;
  transaction<F extends (...args: never[]) => unknown>(fn: F): F;
}

function openSqlite(dataDir: string): FloorDatabase {
  // better-sqlite3 ships no types; this is the part of its API the floor uses.
  const Database = createRequire(import.meta.url)("better-sqlite3") as new (file: string) => SqliteDatabase;
  const db = new Database(join(dataDir, "registry.sqlite"));
  // The service's pragmas (connection.ts), durability included.
  for (const pragma of ["journal_mode = WAL", "foreign_keys = ON", "busy_timeout = 5000", "synchronous = FULL"])
    db.pragma(pragma);
  // The searches' cancellation point, always alive on the main connection (as connection.ts registers it).
  db.function(SEARCH_ALIVE, { deterministic: false }, () => 1);
  const statements = new Map<string, SqliteStatement>();
  let queue: Promise<unknown> = Promise.resolve();
  const run = (sql: string, params: unknown[]): Record<string, unknown>[] => {
    let statement = statements.get(sql);
    if (statement === undefined) statements.set(sql, (statement = db.prepare(sql)));
    if (statement.reader) return statement.all(...params);
    const { changes, lastInsertRowid } = statement.run(...params);
    return [{ affectedRows: changes, insertId: Number(lastInsertRowid) }];
  };
  return {
    read: async (sql, params) => run(sql, params),
    async transaction(work) {
      // One connection, so one transaction at a time (the service's pool of one queues them the same way).
      const turn = queue.then(async () => {
        // IMMEDIATE: take the write lock now (waiting up to busy_timeout), not at the first write, where a
        // snapshot another process has written past since fails at once with SQLITE_BUSY.
        run("BEGIN IMMEDIATE", []);
        try {
          const result = await work(async (sql, params) => run(sql, params));
          run("COMMIT", []);
          return result;
        } catch (error) {
          run("ROLLBACK", []);
          throw error;
        }
      });
      queue = turn.catch(() => undefined);
      return turn;
    },
  };
}

const timestamp = (): string => new Date().toISOString().replace("T", " ").replace("Z", "");

/** A status and the body to send: stored bytes as the driver handed them, or a short JSON text. */
type Answer = [number, Buffer | string];

const comma = Buffer.from(",");

/**
 * What the floor stores as the protobuf binary, having no protobuf: the JSON's
 * bytes, about as many bytes as the binary the service writes (two thirds of
 * the JSON). Nothing reads them: the bench reads only rows the floor has not
 * written (bench/seed.ts, `sample`).
 */
function binaryStandIn(document: string): Buffer {
  return Buffer.from(document);
}

function createFloor(db: FloorDatabase, dialect: "mysql" | "sqlite") {
  const statements = readStatements(dialect);

  async function get(tenant: string, id: string): Promise<Answer> {
    // An Agent_ID= reference reads its agent's newest version, as the service's GET does.
    const read = id.startsWith("Agent_ID=") ? statements.newestByReference : statements.byId;
    const [row] = await db.read(read.one, [id, tenant]);
    if (row === undefined) return [404, '{"error":"no such tenant"}'];
    return row.id === null ? [404, '{"error":"not found"}'] : [200, row.document_json as Buffer];
  }

  async function list(tenant: string, limit: number, offset: number): Promise<Answer> {
    // The service's statement for the unfiltered list (queries/search.ts), which reads one row more than the page.
    const { sql, bindings } = buildSearch(dialect, tenant, unfilteredQuery(limit, offset), defaultPageMaxBytes);
    const rows = inSearchOrder((await db.read(sql, [...bindings])) as unknown as SearchRow[], "createdAt", false).slice(
      0,
      Math.max(limit, 1),
    );
    if (rows.length === 0) return [404, '{"error":"no such tenant"}'];
    const documents = rows.filter((r) => r.id !== null).map((r) => r.document_json as Buffer);
    const data = documents.flatMap((document, i) => (i === 0 ? [document] : [comma, document]));
    return [
      200,
      Buffer.concat([Buffer.from(`{"total":${Number(rows[0]!.total)},"data":[`), ...data, Buffer.from("]}")]),
    ];
  }

  const writes = writeStatements(dialect);
  /** The floor's full-text texts' revisions: it takes none from a tenant's counter, and a later text must win. */
  let textRevision = Date.now() * 1_000;

  /**
   * The service's upsert transaction, statement for statement (the statements of queries/writes.ts's
   * writeStatements, in the order sql-repository.ts runs them for a request without `id` or
   * externalAgentID), minus validation and derived ids.
   */
  async function upsert(tenant: string, body: Record<string, unknown>): Promise<Answer> {
    const name = String(body.name);
    const providerId = String((body.provider as { id?: unknown } | undefined)?.id);
    const version = String(body.version);
    const indexed = definitionIndexOf(
      fromJson(AgentDefinitionSchema, body as JsonObject, { ignoreUnknownFields: true }),
    );
    const document = await db.transaction(async (query) => {
      // The search index's statements run through the service's own indexDefinition, on this transaction.
      const context: WriteContext = {
        statements: writes,
        session: {
          rows: async <T>(sql: string, bindings: readonly WriteBinding[]) => (await query(sql, [...bindings])) as T[],
          change: async (sql: string, bindings: readonly WriteBinding[]) =>
            (await query(sql, [...bindings]))[0] as unknown as Changed,
          commitWith: () => Promise.reject(new Error("The floor's upsert takes no revisions.")),
        },
      };
      // MySQL's full-text text: the service writes it after COMMIT, several writes' in one statement
      // (search-text.ts); the floor, which takes no revision, in the transaction, as the service did before.
      const keepText = async (text: string | undefined, id: string) => {
        if (text !== undefined) await query(keepTextsStatement(1), [tenant, id, text, ++textRevision]);
      };
      const [tenantRow] = await query(writes.tenant, [tenant]);
      if (tenantRow === undefined) throw new Error(`no tenant ${tenant}`);
      const [existing] = await query(writes.instanceByKey, [tenant, name, providerId, version]);
      const now = timestamp();
      if (existing !== undefined) {
        const doc = JSON.stringify({ ...body, id: existing.id, reference_id: existing.reference_id });
        await query(writes.updateDocument, [doc, binaryStandIn(doc), now, tenant, existing.id]);
        await keepText(await indexDefinition(context, tenant, String(existing.id), indexed), String(existing.id));
        return doc;
      }
      let agent: Record<string, unknown> | undefined = (await query(writes.agentByName, [tenant, providerId, name]))[0];
      const id = randomBytes(16).toString("hex");
      /** The definition's row: with no agent and an empty document while staged, complete otherwise. */
      const insertRow = (agentNumber: unknown, doc: string) =>
        query(writes.insertDefinition, [
          id,
          tenant,
          name,
          providerId,
          version,
          agentNumber,
          doc,
          binaryStandIn(doc),
          now,
          now,
          now,
          1,
        ]);
      // MySQL, a new agent: the row and its index first, with no agent; numbered after the sequence
      // (write-transaction.ts, prepareInsert and insert).
      let staged: number | undefined;
      if (agent === undefined && dialect === "mysql") {
        const [inserted] = await insertRow(null, "");
        staged = Number(inserted?.insertId);
        await keepText(await indexDefinition(context, tenant, id, indexed, staged), id);
        // Holds the tenant's sequence from here to COMMIT, and looks for the agent again.
        const [found] = await query(writes.lockSequenceAndFindAgent, [providerId, name, tenant]);
        agent = found?.number === null ? undefined : found;
      }
      if (agent === undefined) {
        const [taken] = await query(writes.takeAgentNumber, [tenant]);
        const number = Number(dialect === "mysql" ? taken?.insertId : taken?.next_agent_number) - 1;
        agent = { number, reference_id: `Agent_ID=${String(tenantRow.sequence_prefix)}${number}` };
        await query(writes.insertAgent, [tenant, number, agent.reference_id, providerId, name, now]);
      }
      const doc = JSON.stringify({ ...body, id, reference_id: agent.reference_id });
      if (staged !== undefined) {
        await query(writes.numberDefinition, [agent.number, doc, binaryStandIn(doc), staged]);
        return doc;
      }
      const [inserted] = await insertRow(agent.number, doc);
      await keepText(
        await indexDefinition(
          context,
          tenant,
          id,
          indexed,
          Number(dialect === "mysql" ? inserted?.insertId : inserted?.seq),
        ),
        id,
      );
      return doc;
    });
    return [201, document];
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://floor");
    const [, floor, tenant, resource, id, ...rest] = url.pathname.split("/");
    let answer: Answer = [404, '{"error":"no such path"}'];
    try {
      if (floor === "floor" && tenant !== undefined && resource === "agentDefinition" && rest.length === 0) {
        if (req.method === "GET" && id !== undefined) answer = await get(tenant, id);
        else if (req.method === "GET")
          answer = await list(
            tenant,
            Number(url.searchParams.get("limit") ?? 20),
            Number(url.searchParams.get("offset") ?? 0),
          );
        else if (req.method === "POST")
          answer = await upsert(tenant, JSON.parse(await readBody(req)) as Record<string, unknown>);
      }
    } catch (error) {
      console.error(error);
      answer = [500, '{"error":"internal"}'];
    }
    res.writeHead(answer[0], {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(answer[1]),
    });
    res.end(answer[1]);
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const databaseUrl = process.env.DATABASE_URL;
const db = databaseUrl ? openMysql(new URL(databaseUrl)) : openSqlite(process.env.DATA_DIR ?? "./data");
const handle = createFloor(db, databaseUrl ? "mysql" : "sqlite");
const server = createServer((req, res) => void handle(req, res));
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address();
  console.log(
    JSON.stringify({
      message: "floor listening",
      port: typeof address === "object" && address !== null ? address.port : 0,
    }),
  );
});
process.once("SIGTERM", () => process.exit(0));
