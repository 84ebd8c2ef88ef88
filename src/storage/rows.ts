/**
 * Rows as the drivers return them, and their mapping to the domain. Both
 * drivers get timestamps as `YYYY-MM-DD HH:MM:SS.mmm` strings in UTC (mysql2
 * runs with `dateStrings`, SQLite stores text), so one parser serves both.
 * Both hand the stored encodings back as Buffers (see queries.ts), which are
 * answered as they are.
 */
import { Buffer } from "node:buffer";
import { fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentRef, InstanceRef, StoredDefinition, Tenant } from "./repository.js";

/** A BIGINT as a driver may hand it back: mysql2 (supportBigNumbers) answers a number, or a string past 2^53. */
export type DatabaseInteger = number | string | bigint;

/** What a write decides on about one instance: its identity and agent, never its content. */
export interface InstanceRow {
  readonly id: string;
  readonly tenant: string;
  readonly agent_number: DatabaseInteger;
  /** From `agents`. */
  readonly reference_id: string;
  readonly created_at: DatabaseTimestamp;
  readonly updated_at: DatabaseTimestamp;
}

/**
 * A row of a hot read (queries.ts): one instance with both stored encodings,
 * read from the tenant's row. Every column but `total` is null when the
 * tenant exists but holds nothing that matches (the LEFT JOINs found nothing).
 */
export interface DefinitionReadRow {
  /** How many instances match across all pages; only the page reads select it. */
  readonly total?: DatabaseInteger;
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
}

/** The columns an insert writes; `seq` is assigned by the database, `reference_id` lives in `agents`. */
export interface NewAgentDefinitionRow {
  readonly id: string;
  readonly tenant: string;
  readonly name: string;
  readonly provider_id: string;
  readonly version: string;
  readonly agent_number: number;
  /** Protobuf JSON as `encodeDefinition` wrote it: a string, which MySQL stores as its UTF-8 (a LONGBLOB) and SQLite as TEXT. */
  readonly document: string;
  /** Protobuf binary, as a Buffer (the drivers bind Buffers as bytes, not other Uint8Arrays). */
  readonly document_binary: Buffer;
  readonly created_at: string;
  readonly updated_at: string;
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
  if (Number.isNaN(instant.getTime())) throw new Error(`Unreadable timestamp in the database: ${JSON.stringify(value)}`);
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
export function encodeDefinition(definition: AgentDefinition): EncodedDefinition {
  const document = toJsonString(AgentDefinitionSchema, definition);
  const binary = toBinary(AgentDefinitionSchema, definition);
  return { document, json: utf8.encode(document), binary: Buffer.from(binary.buffer, binary.byteOffset, binary.byteLength) };
}

/**
 * Parses a `document` column; fields a later schema dropped are ignored rather
 * than failing old rows. Only migrations need it: reads answer the stored bytes.
 */
export function fromDocument(document: string): AgentDefinition {
  return fromJsonString(AgentDefinitionSchema, document, { ignoreUnknownFields: true });
}

/** Maps the row a locking read found under a write to the instance it is. */
export function toInstanceRef(row: InstanceRow): InstanceRef {
  return {
    id: row.id,
    tenant: row.tenant,
    agent: { number: fromDatabaseInteger(row.agent_number), referenceId: row.reference_id },
    createdAt: fromDatabaseTimestamp(row.created_at),
    updatedAt: fromDatabaseTimestamp(row.updated_at),
  };
}

/**
 * Maps a row of a hot read to the stored definition, or undefined when the
 * row is only the tenant's (nothing matched). The encodings are the driver's
 * Buffers, untouched.
 */
export function toStoredDefinition(tenant: string, row: DefinitionReadRow): StoredDefinition | undefined {
  if (row.id === null) return undefined;
  if (row.agent_number === null || row.reference_id === null || row.document_json === null || row.document_binary === null || row.created_at === null || row.updated_at === null) {
    throw new Error(`Agent definition ${row.id} of tenant "${tenant}" was read without its agent or one of its columns.`);
  }
  return {
    id: row.id,
    tenant,
    agent: { number: fromDatabaseInteger(row.agent_number), referenceId: row.reference_id },
    json: row.document_json,
    binary: row.document_binary,
    createdAt: fromDatabaseTimestamp(row.created_at),
    updatedAt: fromDatabaseTimestamp(row.updated_at),
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
