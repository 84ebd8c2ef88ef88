/**
 * The repository on knex: MySQL/MariaDB in production, SQLite embedded.
 */
import type { Knex } from "knex";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { RegistryError, tenantNotFound, unavailable } from "../domain/errors.js";
import { openDatabase } from "./connection.js";
import type { Database, StorageOptions } from "./connection.js";
import { classifyDriverError } from "./driver-errors.js";
import { migrateToLatest } from "./migrations/index.js";
import * as queries from "./queries.js";
import type { QueryContext } from "./queries.js";
import { toAgentRecord, toDatabaseTimestamp, toDocument } from "./rows.js";
import type {
  AgentDefinitionRepository,
  AgentRecord,
  ListResult,
  Page,
  UpsertDecision,
  UpsertKey,
  UpsertResult,
} from "./repository.js";

export type { StorageOptions } from "./connection.js";

/** How often an upsert is tried before a race is reported as a conflict. */
const upsertAttempts = 5;
/** Base of the exponential backoff between attempts, in milliseconds. */
const backoffBaseMillis = 10;

const instanceId = /^[0-9a-f]{32}$/;

/**
 * Opens the database, brings its schema up to date and returns the
 * repository. Throws `UNAVAILABLE` when the database cannot be reached.
 */
export async function createKnexRepository(options: StorageOptions): Promise<AgentDefinitionRepository> {
  const database = await openDatabase(options);
  try {
    await migrateToLatest(database.db);
  } catch (error) {
    await database.db.destroy().catch(() => undefined);
    throw translate(error);
  }
  return new KnexRepository(database);
}

class KnexRepository implements AgentDefinitionRepository {
  readonly #db: Knex;
  readonly #context: QueryContext;

  constructor({ db, dialect }: Database) {
    this.#db = db;
    this.#context = { tx: db, dialect };
  }

  async upsert(tenant: string, key: UpsertKey, decide: UpsertDecision): Promise<UpsertResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#db.transaction((tx) => this.#upsertOnce({ ...this.#context, tx }, tenant, key, decide));
      } catch (error) {
        if (error instanceof RegistryError) throw error;
        const kind = classifyDriverError(error);
        if (kind === "unavailable") throw unavailable(error);
        if (kind !== "retryable") throw error;
        if (attempt >= upsertAttempts) {
          throw new RegistryError(
            "conflict",
            "CONFLICT",
            "The definition could not be saved because of concurrent changes to the same key; try again.",
            [],
            { cause: error },
          );
        }
        await sleep(backoffMillis(attempt));
      }
    }
  }

  async #upsertOnce(context: QueryContext, tenant: string, key: UpsertKey, decide: UpsertDecision): Promise<UpsertResult> {
    if (!(await queries.tenantExists(context, tenant))) throw tenantNotFound(tenant);
    const existingRow = await queries.findByKeyForUpdate(context, tenant, key);
    const existing = existingRow === undefined ? undefined : toAgentRecord(existingRow);
    const definition = await decide(existing);
    const now = new Date();
    const document = toDocument(definition);
    if (existing === undefined) {
      assertNewId(definition);
      await queries.insertDefinition(context, {
        id: definition.id,
        tenant,
        name: key.name,
        provider_id: key.providerId,
        version: key.version,
        document,
        created_at: toDatabaseTimestamp(now),
        updated_at: toDatabaseTimestamp(now),
      });
      return { created: true, record: { id: definition.id, tenant, definition, createdAt: now, updatedAt: now } };
    }
    if (definition.id !== existing.id) {
      // The id is the instance's identity and links versions: an update must never move it.
      throw new Error(`decide() returned id "${definition.id}" for the existing instance "${existing.id}".`);
    }
    await queries.updateDocument(context, tenant, existing.id, document, toDatabaseTimestamp(now));
    return { created: false, record: { ...existing, definition, updatedAt: now } };
  }

  async get(tenant: string, id: string): Promise<AgentRecord | undefined> {
    // Not an id we could have issued; also keeps non-ASCII out of a comparison with the ASCII id column.
    if (!instanceId.test(id)) return undefined;
    const row = await guard(() => queries.findById(this.#context, tenant, id));
    return row === undefined ? undefined : toAgentRecord(row);
  }

  async list(tenant: string, page: Page): Promise<ListResult> {
    const limit = Math.max(0, Math.trunc(page.limit));
    const offset = Math.max(0, Math.trunc(page.offset));
    const total = await guard(() => queries.countByTenant(this.#context, tenant));
    // A zero limit still answers the total; knex would drop a LIMIT 0 and return everything.
    const rows = limit === 0 || offset >= total ? [] : await guard(() => queries.listByTenant(this.#context, tenant, limit, offset));
    return { total, items: rows.map(toAgentRecord) };
  }

  tenantExists(tenant: string): Promise<boolean> {
    return guard(() => queries.tenantExists(this.#context, tenant));
  }

  async close(): Promise<void> {
    await this.#db.destroy();
  }
}

function assertNewId(definition: AgentDefinition): void {
  if (!instanceId.test(definition.id)) {
    throw new Error(`decide() returned "${definition.id}" as a new instance id; expected 32 lowercase hex characters.`);
  }
}

/** Runs a read, turning connection failures into `UNAVAILABLE`. */
async function guard<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw translate(error);
  }
}

function translate(error: unknown): unknown {
  if (error instanceof RegistryError) return error;
  return classifyDriverError(error) === "unavailable" ? unavailable(error) : error;
}

/** Exponential with full jitter, so racing writers spread out instead of colliding again. */
function backoffMillis(attempt: number): number {
  return Math.random() * backoffBaseMillis * 2 ** attempt;
}

function sleep(millis: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, millis));
}
