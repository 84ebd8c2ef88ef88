/**
 * Rows as the drivers return them, and their mapping to the domain. Both
 * drivers get timestamps as `YYYY-MM-DD HH:MM:SS.mmm` strings in UTC (mysql2
 * runs with `dateStrings`, SQLite stores text), so one parser serves both.
 */
import { fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentRecord, AgentRef, Tenant } from "./repository.js";

/** A BIGINT as a driver may hand it back: mysql2 (supportBigNumbers) answers a number, or a string past 2^53. */
export type DatabaseInteger = number | string | bigint;

/** A row of `agent_definitions`, joined with its agent's `reference_id`. */
export interface AgentDefinitionRow {
  readonly id: string;
  /** Insertion order; mysql2 may answer a BIGINT as a string. */
  readonly seq: DatabaseInteger;
  readonly tenant: string;
  readonly name: string;
  readonly provider_id: string;
  readonly version: string;
  readonly agent_number: DatabaseInteger;
  /** From `agents`. */
  readonly reference_id: string;
  /** The definition as protobuf JSON. */
  readonly document: string;
  readonly created_at: DatabaseTimestamp;
  readonly updated_at: DatabaseTimestamp;
}

/** The columns an insert writes; `seq` is assigned by the database, `reference_id` lives in `agents`. */
export type NewAgentDefinitionRow = Omit<AgentDefinitionRow, "seq" | "reference_id">;

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

/** Serialises a definition for the `document` column. */
export function toDocument(definition: AgentDefinition): string {
  return toJsonString(AgentDefinitionSchema, definition);
}

/** Parses a `document` column; fields a later schema dropped are ignored rather than failing old rows. */
export function fromDocument(document: string): AgentDefinition {
  return fromJsonString(AgentDefinitionSchema, document, { ignoreUnknownFields: true });
}

/** Maps a stored row to the domain's record. */
export function toAgentRecord(row: AgentDefinitionRow): AgentRecord {
  return {
    id: row.id,
    tenant: row.tenant,
    agent: { number: fromDatabaseInteger(row.agent_number), referenceId: row.reference_id },
    definition: fromDocument(row.document),
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
