/**
 * The rows of one seeding batch (seed.ts): `n` new agents numbered from
 * `first`, each with its one definition, as the service writes a new agent: a
 * random 32-hex id, both encodings the service stores (`withDerivedFields`,
 * then the storage's own `encodeDefinition`) and the side rows of its search
 * index (the storage's own `sideRowsOf`: searchTermsOf and searchTextOf).
 * Pure CPU, made in worker threads (seed-worker.ts) while the database
 * writes the batch before.
 */
import { randomBytes } from "node:crypto";
import { clone, create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { AgentDefinitionSchema, SkillTagSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { withDerivedFields } from "../src/domain/derived-fields.js";
import { type SideRows, sideRowsOf, type Unindexed } from "../src/storage/queries/search-index.js";
import { agentReferenceId, encodeDefinition } from "../src/storage/rows.js";
import { BENCH_PROVIDER, BENCH_VERSION, benchDefinition } from "./definition.js";

/**
 * One seeded definition in a hundred (agent numbers divisible by 100) has this extra skill tag and
 * this word in its description: what the search scenarios' `tag` and `q` find, about 1 % of the tenant.
 */
export const ONE_PERCENT_TAG = "one-percent";
export const ONE_PERCENT_WORD = "quasar";

/** The prefix of every seeded definition's name; updates POST these names again. */
export const SEEDED_NAME_PREFIX = "Bench Agent ";

/** What a batch is made from. */
export interface BatchSpec {
  readonly tenant: string;
  /** The tenant's agent id sequence prefix. */
  readonly prefix: string;
  /** The first agent number. */
  readonly first: number;
  readonly n: number;
  /** The seq of the first definition; the others follow one by one. */
  readonly seq: number;
  /** created_at and the other timestamps, as the database stores them. */
  readonly now: string;
}

/** A batch's rows, ready to insert. */
export interface Batch extends BatchSpec {
  readonly agents: Record<string, string | number>[];
  readonly definitions: Record<string, string | number | Uint8Array>[];
  readonly side: SideRows;
  /** The middle definition: its id, and the JSON a GET of it must answer. */
  readonly sample: { readonly id: string; readonly json: JsonValue };
}

let base: ReturnType<typeof fromJson<typeof AgentDefinitionSchema>> | undefined;

export function makeBatch(spec: BatchSpec): Batch {
  base ??= fromJson(AgentDefinitionSchema, benchDefinition("") as JsonObject);
  const { tenant, prefix, first, n, seq, now } = spec;
  const agents: Batch["agents"] = [];
  const definitions: Batch["definitions"] = [];
  const indexed: Unindexed[] = [];
  let sample: Batch["sample"] | undefined;
  for (let i = 0; i < n; i++) {
    const number = first + i;
    const referenceId = agentReferenceId(prefix, number);
    const name = `${SEEDED_NAME_PREFIX}${number}`;
    let input = base;
    if (number % 100 === 0) {
      input = clone(AgentDefinitionSchema, base);
      input.description = `${input.description} ${ONE_PERCENT_WORD}`;
      input.skills[0]?.tags.push(create(SkillTagSchema, { tag: ONE_PERCENT_TAG }));
    }
    // withDerivedFields clones its input: the shared base only lends its name for the call.
    const kept = input.name;
    input.name = name;
    const definition = withDerivedFields(input, randomBytes(16).toString("hex"), referenceId);
    input.name = kept;
    const { document, binary } = encodeDefinition(definition);
    // What a GET must answer: the document as the storage's own encoding wrote it.
    if (i === n >> 1) sample = { id: definition.id, json: JSON.parse(document) as JsonValue };
    indexed.push({ seq: seq + i, tenant, status: "ACTIVE", latest: true, definition });
    agents.push({ tenant, number, reference_id: referenceId, provider_id: BENCH_PROVIDER, name, created_at: now });
    definitions.push({
      id: definition.id,
      seq: seq + i,
      tenant,
      name,
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
  if (sample === undefined) throw new Error("A seeding batch of no definitions.");
  return { ...spec, agents, definitions, side: sideRowsOf(indexed), sample };
}
