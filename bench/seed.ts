/**
 * Fills the bench tenant with definitions fast: batches of multi-row inserts
 * straight into `agents` and `agent_definitions`, instead of one upsert
 * transaction per definition. The rows are the ones the service writes for a
 * new agent: a new agent number from the tenant's sequence, a random 32-hex
 * id, and both encodings the service stores (`withDerivedFields`, then the
 * storage's own `encodeDefinition`). The run checks that a GET of a seeded row
 * answers that document (see `expected`).
 */
import { randomBytes } from "node:crypto";
import { clone, create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { type AgentDefinition, AgentDefinitionSchema, SkillTagSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { withDerivedFields } from "../src/domain/derived-fields.js";
import { insertSideRows } from "../src/storage/queries/search-index.js";
import { agentReferenceId, encodeDefinition, toDatabaseTimestamp } from "../src/storage/rows.js";
import { type Dialect, openDatabase } from "../src/storage/run/connection.js";
import { BENCH_PROVIDER, BENCH_VERSION, benchDefinition } from "./definition.js";

/**
 * Rows per batch: about 5 MB of documents (JSON, and binary written as hex), well under MariaDB's default 16
 * MB max_allowed_packet.
 */
const batchSize = 1000;
/**
 * Rows per INSERT statement on SQLite: knex writes a multi-row insert as a compound SELECT, which SQLite caps
 * at 500 terms.
 */
const sqliteRowsPerInsert = 400;

/**
 * One seeded definition in a hundred (agent numbers divisible by 100) has this extra skill tag and
 * this word in its description: what the search scenarios' `tag` and `q` find, about 1 % of the tenant.
 */
export const ONE_PERCENT_TAG = "one-percent";
export const ONE_PERCENT_WORD = "quasar";
/**
 * A second word on the same 1 % (issue 24): `q=quasar nebula` matches exactly the definitions `q=quasar`
 * does, so the two-word scenario's AND keeps 1 % (the words are not independent: an independent second
 * 1 % would leave 0.01 %).
 */
export const ONE_PERCENT_SECOND_WORD = "nebula";

/** How many of the agents numbered 1 to `n` carry the 1 % markers. */
export function onePercentOf(n: number): number {
  return Math.floor(n / 100);
}

/** The prefix of every seeded definition's name; updates POST these names again. */
export const SEEDED_NAME_PREFIX = "Bench Agent ";

/** The seeded agents whose definitions the update scenarios rewrite. */
const UPDATE_POOL = { from: 21, to: 900 };

export interface Seeder {
  /** Definitions in the tenant now. */
  count(): Promise<number>;
  /** Adds definitions until the tenant has `target`; resolves with how many were added. */
  topUp(target: number): Promise<number>;
  /** A seeded definition and the JSON a GET of it must answer. */
  expected(): { readonly id: string; readonly json: JsonValue } | undefined;
  /**
   * Up to `n` random ids to read, and up to `n` random names of seeded
   * definitions to update. The names come from agents 21 to 900, the ids from
   * the others: the floor's updates store the body without derived ids, so
   * rows it updated are kept out of what later reads and list pages see (the
   * first page holds agents 1 to 20, a last page the newest).
   */
  sample(n: number): Promise<{ ids: string[]; names: string[] }>;
  /**
   * Deletes the definitions and agents the create scenarios made (their names start with `prefix`), so the
   * next size starts exact.
   */
  removeCreated(prefix: string): Promise<number>;
  close(): Promise<void>;
}

export async function openSeeder(options: {
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly tenant: string;
}): Promise<Seeder> {
  const { db, dialect } = await openDatabase({ databaseUrl: options.databaseUrl, dataDir: options.dataDir });
  const tenant = options.tenant;
  const base = fromJson(AgentDefinitionSchema, benchDefinition("") as JsonObject);
  let last: { id: string; json: JsonValue } | undefined;

  const count = async (): Promise<number> => {
    const row = (await db("agent_definitions").where({ tenant }).count({ total: "*" }).first()) as
      | { total: number | string }
      | undefined;
    return Number(row?.total ?? 0);
  };

  /** The rows of `n` new agents numbered from `first`, each with its one definition. */
  const makeRows = async (prefix: string, first: number, n: number) => {
    const now = toDatabaseTimestamp(new Date());
    const agents = [];
    const definitions = [];
    const indexed: AgentDefinition[] = [];
    for (let i = 0; i < n; i++) {
      const number = first + i;
      const referenceId = agentReferenceId(prefix, number);
      const input = clone(AgentDefinitionSchema, base);
      input.name = `${SEEDED_NAME_PREFIX}${number}`;
      if (number % 100 === 0) {
        input.description = `${input.description} ${ONE_PERCENT_WORD} ${ONE_PERCENT_SECOND_WORD}`;
        input.skills[0]?.tags.push(create(SkillTagSchema, { tag: ONE_PERCENT_TAG }));
      }
      const definition = await withDerivedFields(input, randomBytes(16).toString("hex"), referenceId);
      const { document, binary } = encodeDefinition(definition);
      // What a GET must answer: the document as the storage's own encoding wrote it.
      if (i === n >> 1) last = { id: definition.id, json: JSON.parse(document) as JsonValue };
      indexed.push(definition);
      agents.push({
        tenant,
        number,
        reference_id: referenceId,
        provider_id: BENCH_PROVIDER,
        name: input.name,
        created_at: now,
      });
      definitions.push({
        id: definition.id,
        tenant,
        name: input.name,
        provider_id: BENCH_PROVIDER,
        version: BENCH_VERSION,
        agent_number: number,
        document,
        document_binary: binary,
        created_at: now,
        updated_at: now,
        status_changed_at: now,
        is_latest: 1,
      });
    }
    return { first, n, agents, definitions, indexed };
  };

  const insertBatch = async ({
    first,
    n,
    agents,
    definitions,
    indexed,
  }: Awaited<ReturnType<typeof makeRows>>): Promise<void> => {
    await db.transaction(async (tx) => {
      const sequence = await lockTenant(tx, dialect, tenant);
      // Nothing else writes while the bench seeds; if something did, its agent numbers would clash with ours.
      if (Number(sequence.next_agent_number) !== first)
        throw new Error(
          `The tenant's next agent number moved to ${sequence.next_agent_number} while seeding from ${first}.`,
        );
      // seq given explicitly on both (MySQL moves its AUTO_INCREMENT past it), so the side rows can name it.
      const seq =
        Number(((await tx("agent_definitions").max({ m: "seq" }).first()) as { m: number | string | null }).m ?? 0) + 1;
      const rows = definitions.map((d, i) => ({ ...d, seq: seq + i }));
      const perInsert = dialect === "sqlite" ? sqliteRowsPerInsert : batchSize;
      for (let at = 0; at < n; at += perInsert) {
        await tx("agents").insert(agents.slice(at, at + perInsert));
        await tx("agent_definitions").insert(rows.slice(at, at + perInsert));
      }
      // The side rows the service's write path makes, by the storage's own insertSideRows.
      const unindexed = indexed.map((definition, i) => ({
        seq: seq + i,
        tenant,
        status: "ACTIVE",
        latest: true,
        definition,
      }));
      await insertSideRows(dialect, (sql, bindings) => tx.raw(sql, bindings as Knex.Value[]), unindexed);
      await tx("tenants")
        .where({ name: tenant })
        .update({ next_agent_number: first + n });
    });
  };

  return {
    count,
    async topUp(target) {
      let total = await count();
      const before = total;
      const sequence = await lockTenant(db, dialect, tenant);
      let next = Number(sequence.next_agent_number);
      // The next batch is made while the last one is inserted: the documents cost as much CPU as the inserts.
      let inserting: Promise<void> = Promise.resolve();
      while (total < target) {
        const n = Math.min(batchSize, target - total);
        const rows = await makeRows(sequence.sequence_prefix, next, n);
        await inserting;
        inserting = insertBatch(rows);
        // Not left unhandled while the next batch is made; awaited (and rethrown) on the next turn.
        inserting.catch(() => undefined);
        next += n;
        total += n;
        // A million takes a while: say how it goes.
        if ((total - before) % 50_000 < n && total - before >= 50_000)
          console.error(`[seed] ${total - before} of ${target - before} definitions written`);
      }
      await inserting;
      return total - before;
    },
    expected: () => last,
    async sample(n) {
      const rows = (await db("agent_definitions").where({ tenant }).select(["id", "name"])) as {
        id: string;
        name: string;
      }[];
      const pick = <T>(items: T[]): T[] => {
        const copy = [...items];
        for (let i = copy.length - 1; i > 0; i--) {
          const j = Math.floor(Math.random() * (i + 1));
          [copy[i], copy[j]] = [copy[j]!, copy[i]!];
        }
        return copy.slice(0, n);
      };
      const inPool = (name: string): boolean => {
        if (!name.startsWith(SEEDED_NAME_PREFIX)) return false;
        const number = Number(name.slice(SEEDED_NAME_PREFIX.length));
        return number >= UPDATE_POOL.from && number <= UPDATE_POOL.to;
      };
      const readable = rows.filter((r) => !inPool(r.name));
      return {
        ids: pick((readable.length >= 20 ? readable : rows).map((r) => r.id)),
        names: pick(rows.filter((r) => inPool(r.name)).map((r) => r.name)),
      };
    },
    async removeCreated(prefix) {
      return db.transaction(async (tx) => {
        await lockTenant(tx, dialect, tenant);
        const created = tx("agents").select("number").where({ tenant }).andWhere("name", "like", `${prefix}%`);
        const removed = await tx("agent_definitions").where({ tenant }).whereIn("agent_number", created).delete();
        await tx("agents").where({ tenant }).andWhere("name", "like", `${prefix}%`).delete();
        // The created agents were the newest, so numbering goes on from the newest left: no gaps.
        const newest = (await tx("agents").where({ tenant }).max({ m: "number" }).first()) as
          | { m: number | string | null }
          | undefined;
        await tx("tenants")
          .where({ name: tenant })
          .update({ next_agent_number: Number(newest?.m ?? 0) + 1 });
        return removed;
      });
    },
    close: () => db.destroy(),
  };
}

/**
 * The tenant's sequence row; locked on MySQL inside a transaction, so a seeding batch takes numbers as the
 * service does.
 */
async function lockTenant(
  tx: Knex | Knex.Transaction,
  dialect: Dialect,
  tenant: string,
): Promise<{ sequence_prefix: string; next_agent_number: number | string }> {
  const query = tx("tenants").select(["sequence_prefix", "next_agent_number"]).where({ name: tenant });
  if (dialect === "mysql" && "commit" in tx) query.forUpdate();
  const row = (await query.first()) as
    | { sequence_prefix: string | null; next_agent_number: number | string }
    | undefined;
  if (row?.sequence_prefix == null)
    throw new Error(`The bench tenant "${tenant}" is missing or has no agent id sequence.`);
  return { sequence_prefix: row.sequence_prefix, next_agent_number: row.next_agent_number };
}
