/**
 * Rows as the drivers return them, and their mapping to the domain. Both
 * drivers get timestamps as `YYYY-MM-DD HH:MM:SS.mmm` strings in UTC (mysql2
 * runs with `dateStrings`, SQLite stores text), so one parser serves both.
 * Both hand the stored encodings back as Buffers (see queries/reads.ts), which are
 * answered as they are.
 */
import { Buffer } from "node:buffer";
import {
  type DescField,
  type DescMessage,
  fromJsonString,
  type JsonObject,
  type JsonValue,
  type MessageShape,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { tenantNotFound } from "../domain/errors.js";
import {
  DEFINITION_STATUSES,
  type DefinitionStatus,
  type KeyedInstanceRef,
  type Lifecycle,
} from "../domain/records.js";
import type { AgentRef, Found, StoredDefinition, Tenant } from "./repository.js";

/** A BIGINT as a driver may hand it back: mysql2 (supportBigNumbers) answers a number, or a string past 2^53. */
export type DatabaseInteger = number | string | bigint;

/** What a write decides on about one instance: its identity and agent, never its content. */
export interface InstanceRow {
  readonly id: string;
  readonly tenant: string;
  readonly agent_number: DatabaseInteger;
  /** From `agents`. */
  readonly reference_id: string;
  readonly name: string;
  readonly provider_id: string;
  readonly version: string;
  readonly created_at: DatabaseTimestamp;
  readonly updated_at: DatabaseTimestamp;
  readonly revision: DatabaseInteger;
  readonly mod_revision: DatabaseInteger;
  readonly status: string;
  readonly status_message: string | null;
  readonly status_changed_at: DatabaseTimestamp;
  readonly is_latest: DatabaseBoolean;
  /** Migration 0021: `meta.liveness` as JSON; null when never probed. */
  readonly liveness?: string | null;
  /** The stored protobuf binary, to tell an update that changes nothing. */
  readonly document_binary: Uint8Array;
}

/** A BOOLEAN as the drivers answer it: MySQL's TINYINT(1) and SQLite's integer, 0 or 1. */
export type DatabaseBoolean = number | string | boolean | bigint;

/**
 * A row of a hot read (queries/reads.ts): one instance with both stored encodings,
 * read from the tenant's row. Every column but `total` is null when the
 * tenant exists but holds nothing that matches (the LEFT JOINs found nothing).
 */
export interface DefinitionReadRow {
  /** How many instances match across all pages; only the page reads select it. */
  readonly total?: DatabaseInteger;
  /**
   * The tenant's revision in the statement's snapshot (migration 0015); null for a tenant written only by a
   * version before it. Selected by the reads that answer it.
   */
  readonly tenant_revision?: DatabaseInteger | null;
  /** Insertion order; only the page reads select it, to put the page in order. */
  readonly seq?: DatabaseInteger | null;
  readonly id: string | null;
  readonly agent_number: DatabaseInteger | null;
  readonly reference_id: string | null;
  /** The `document` column as bytes: protobuf JSON, UTF-8. */
  readonly document_json: Uint8Array | null;
  /** Protobuf binary. */
  readonly document_binary: Uint8Array | null;
  readonly created_at: DatabaseTimestamp | null;
  readonly updated_at: DatabaseTimestamp | null;
  /** The lifecycle columns (migration 0008), read by the same statement. */
  readonly revision: DatabaseInteger | null;
  /** Migration 0015: the tenant revision that last changed the version. */
  readonly mod_revision: DatabaseInteger | null;
  readonly status: string | null;
  readonly status_message: string | null;
  readonly status_changed_at: DatabaseTimestamp | null;
  readonly is_latest: DatabaseBoolean | null;
  /** Migration 0021: `meta.liveness` as JSON; null when never probed. */
  readonly liveness?: string | null;
}

/** The columns an insert writes; `seq` is assigned by the database, `reference_id` lives in `agents`. */
export interface NewAgentDefinitionRow {
  readonly id: string;
  readonly tenant: string;
  readonly name: string;
  readonly provider_id: string;
  readonly version: string;
  /** NULL while a MySQL write has the row staged, before its agent is known (write-transaction.ts prepareInsert). */
  readonly agent_number: number | null;
  /**
   * Protobuf JSON as `encodeDefinition` wrote it: a string, which MySQL stores as its UTF-8 (a LONGBLOB) and
   * SQLite as TEXT.
   */
  readonly document: string;
  /** Protobuf binary, as a Buffer (the drivers bind Buffers as bytes, not other Uint8Arrays). */
  readonly document_binary: Buffer;
  readonly created_at: string;
  readonly updated_at: string;
  /** The creation time again: a new version's status is set as it is created. */
  readonly status_changed_at: string;
  /** Whether it is its agent's latest version: a new version is, being ACTIVE and the newest. */
  readonly is_latest: boolean;
}

/** A row of `tenants`. */
export interface TenantRow {
  readonly name: string;
  readonly sequence_prefix: string | null;
  readonly next_agent_number: DatabaseInteger;
  readonly created_at: DatabaseTimestamp;
}

/** A row of `agents`. */
export interface AgentRow {
  readonly tenant: string;
  readonly number: DatabaseInteger;
  readonly reference_id: string;
  readonly provider_id: string;
  readonly name: string;
  readonly created_at: DatabaseTimestamp;
}

/** A row of `agent_external_ids`. */
export interface AgentExternalIdRow {
  readonly tenant: string;
  readonly provider_id: string;
  readonly external_agent_id: string;
  readonly agent_number: DatabaseInteger;
  readonly created_at: DatabaseTimestamp;
}

/** A timestamp as a driver may hand it back: our strings, or a Date or epoch ms if a driver is configured otherwise. */
export type DatabaseTimestamp = string | Date | number;

/** Formats an instant for a DATETIME(3) column: UTC, millisecond precision. */
export function toDatabaseTimestamp(instant: Date): string {
  // toISOString is always UTC with milliseconds: 2024-01-02T03:04:05.678Z
  return instant.toISOString().replace("T", " ").replace("Z", "");
}

/** Reads a timestamp column back as an instant. */
export function fromDatabaseTimestamp(value: DatabaseTimestamp): Date {
  if (value instanceof Date) return new Date(value.getTime());
  if (typeof value === "number") return new Date(value);
  // Stored without a zone because MySQL's DATETIME has none; it is UTC by construction.
  const instant = new Date(`${value.trim().replace(" ", "T")}Z`);
  if (Number.isNaN(instant.getTime()))
    throw new Error(`Unreadable timestamp in the database: ${JSON.stringify(value)}`);
  return instant;
}

/** Reads a BIGINT column back as a number; a value past 2^53 would be a broken database, not a real count. */
export function fromDatabaseInteger(value: DatabaseInteger): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) throw new Error(`Integer out of range in the database: ${String(value)}`);
  return number;
}

/** A definition in the encodings it is stored and answered in. */
export interface EncodedDefinition {
  /** Protobuf JSON, for the `document` column. */
  readonly document: string;
  /** The same JSON as UTF-8 bytes: what a JSON answer sends. */
  readonly json: Uint8Array;
  /** Protobuf binary, for the `document_binary` column: what a binary answer sends. */
  readonly binary: Buffer;
}

const utf8 = new TextEncoder();

/**
 * The only place a definition is encoded for storage: every write (and the
 * migration that added the binary encoding) goes through here, so the two
 * encodings of a row always describe the same message, and reads never
 * encode anything.
 */
export function encodeDefinition(sent: AgentDefinition): EncodedDefinition {
  // `meta` is the registry's, kept in columns and spliced into answers; what a client sent is
  // ignored, so it is never stored (a stored meta would merge into the answered one).
  const definition: AgentDefinition = sent.meta === undefined ? sent : { ...sent, meta: undefined };
  // Every list member shown, empty as [], so a client reads back the lists it sent.
  const document = JSON.stringify(toJsonWithEmptyLists(AgentDefinitionSchema, definition));
  const binary = toBinary(AgentDefinitionSchema, definition);
  return {
    document,
    json: utf8.encode(document),
    binary: Buffer.from(binary.buffer, binary.byteOffset, binary.byteLength),
  };
}

/**
 * A message as protobuf JSON (what `toJsonString` writes, members in field
 * number order) plus every list member that JSON leaves out because it is
 * empty, as `[]`, in the messages at every depth: a client that sent
 * `"tags": []` reads it back, and a client that left a list out reads `[]`.
 * Scalars keep protobuf JSON's presence rules (`alwaysEmitImplicit` would
 * also write `""`, `0` and `false` for every unset scalar).
 */
export function toJsonWithEmptyLists<Desc extends DescMessage>(desc: Desc, message: MessageShape<Desc>): JsonObject {
  return withEmptyLists(desc, toJson(desc, message) as JsonObject);
}

function withEmptyLists(desc: DescMessage, json: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const field of inNumberOrder(desc)) {
    const value = json[field.jsonName];
    if (field.fieldKind === "list") {
      const items = (value ?? []) as JsonValue[];
      out[field.jsonName] =
        field.listKind === "message" && hasFieldsInJson(field.message)
          ? items.map((item) => withEmptyLists(field.message, item as JsonObject))
          : items;
    } else if (value === undefined) {
    } else if (field.fieldKind === "message" && hasFieldsInJson(field.message)) {
      out[field.jsonName] = withEmptyLists(field.message, value as JsonObject);
    } else {
      // Scalars, enums and maps as protobuf JSON wrote them (the contract has no maps of messages).
      out[field.jsonName] = value;
    }
  }
  return out;
}

/** Each message's fields in field number order, sorted once per message type (every write walks them). */
const fieldsInNumberOrder = new WeakMap<DescMessage, readonly DescField[]>();

function inNumberOrder(desc: DescMessage): readonly DescField[] {
  let fields = fieldsInNumberOrder.get(desc);
  if (fields === undefined) {
    fields = [...desc.fields].sort((a, b) => a.number - b.number);
    fieldsInNumberOrder.set(desc, fields);
  }
  return fields;
}

/** Whether a message's JSON is an object of its fields: not so for the well-known types (Timestamp, Struct...). */
function hasFieldsInJson(desc: DescMessage): boolean {
  return !desc.typeName.startsWith("google.protobuf.");
}

/**
 * Parses a `document` column; fields a later schema dropped are ignored rather
 * than failing old rows. Only migrations need it: reads answer the stored bytes.
 */
export function fromDocument(document: string): AgentDefinition {
  return fromJsonString(AgentDefinitionSchema, document, { ignoreUnknownFields: true });
}

/** Maps the row a locking read found under a write to the instance it is. */
export function toInstanceRef(row: InstanceRow): KeyedInstanceRef {
  return {
    id: row.id,
    tenant: row.tenant,
    agent: { number: fromDatabaseInteger(row.agent_number), referenceId: row.reference_id },
    key: { name: row.name, providerId: row.provider_id, version: row.version },
    binary: row.document_binary,
    createdAt: fromDatabaseTimestamp(row.created_at),
    updatedAt: fromDatabaseTimestamp(row.updated_at),
    ...toLifecycle(row),
  };
}

const statuses: ReadonlySet<string> = new Set<DefinitionStatus>(DEFINITION_STATUSES);

/** The lifecycle members of an instance, as they are. */
export function lifecycleOf(instance: Lifecycle): Lifecycle {
  return {
    revision: instance.revision,
    modRevision: instance.modRevision,
    status: instance.status,
    statusMessage: instance.statusMessage,
    statusChangedAt: instance.statusChangedAt,
    latest: instance.latest,
    ...(instance.liveness == null ? {} : { liveness: instance.liveness }),
  };
}

/** The lifecycle columns of a row as the domain's Lifecycle. */
export function toLifecycle(
  row: Pick<
    InstanceRow,
    "revision" | "mod_revision" | "status" | "status_message" | "status_changed_at" | "is_latest" | "liveness"
  >,
): Lifecycle {
  if (!statuses.has(row.status))
    throw new Error(`Unknown definition status in the database: ${JSON.stringify(row.status)}`);
  return {
    revision: fromDatabaseInteger(row.revision),
    modRevision: fromDatabaseInteger(row.mod_revision),
    status: row.status as DefinitionStatus,
    statusMessage: row.status_message,
    statusChangedAt: fromDatabaseTimestamp(row.status_changed_at),
    latest: Number(row.is_latest) === 1 || row.is_latest === true,
    ...(row.liveness == null ? {} : { liveness: row.liveness }),
  };
}

/**
 * Maps a row of a hot read to the stored definition, or undefined when the
 * row is only the tenant's (nothing matched). The encodings are the driver's
 * Buffers, untouched.
 */
export function toStoredDefinition(tenant: string, row: DefinitionReadRow): StoredDefinition | undefined {
  if (row.id === null) return undefined;
  if (
    row.agent_number === null ||
    row.reference_id === null ||
    row.document_json === null ||
    row.document_binary === null ||
    row.created_at === null ||
    row.updated_at === null ||
    row.revision === null ||
    row.mod_revision === null ||
    row.status === null ||
    row.status_changed_at === null ||
    row.is_latest === null
  ) {
    throw new Error(
      `Agent definition ${row.id} of tenant "${tenant}" was read without its agent or one of its columns.`,
    );
  }
  return {
    id: row.id,
    tenant,
    agent: { number: fromDatabaseInteger(row.agent_number), referenceId: row.reference_id },
    json: row.document_json,
    binary: row.document_binary,
    createdAt: fromDatabaseTimestamp(row.created_at),
    updatedAt: fromDatabaseTimestamp(row.updated_at),
    ...toLifecycle({
      revision: row.revision,
      mod_revision: row.mod_revision,
      status: row.status,
      status_message: row.status_message,
      status_changed_at: row.status_changed_at,
      is_latest: row.is_latest,
      liveness: row.liveness ?? null,
    }),
  };
}

/** Maps a stored tenant row to the domain's tenant. */
export function toTenant(row: TenantRow): Tenant {
  return {
    name: row.name,
    sequencePrefix: row.sequence_prefix,
    nextAgentNumber: fromDatabaseInteger(row.next_agent_number),
    createdAt: fromDatabaseTimestamp(row.created_at),
  };
}

/** Maps a stored agent row to the domain's reference to it. */
export function toAgentRef(row: Pick<AgentRow, "number" | "reference_id">): AgentRef {
  return { number: fromDatabaseInteger(row.number), referenceId: row.reference_id };
}

/** The reference id of agent `number` in a sequence with `prefix`. */
export function agentReferenceId(prefix: string, number: number): string {
  return `Agent_ID=${prefix}${number}`;
}

/** The tenant revision a read's row carries: 0 for a tenant no write has counted yet (no row in 0015's table). */
export function tenantRevisionOf(row: DefinitionReadRow): number {
  return row.tenant_revision == null ? 0 : fromDatabaseInteger(row.tenant_revision);
}

/**
 * The one instance a hot read found, or undefined, with the tenant revision it read at; `TENANT_NOT_FOUND` when
 * it found no tenant row.
 */
export function oneOf(tenant: string, rows: readonly DefinitionReadRow[]): Found {
  const [row] = rows;
  if (row === undefined) throw tenantNotFound(tenant);
  return { stored: toStoredDefinition(tenant, row), revision: tenantRevisionOf(row) };
}
