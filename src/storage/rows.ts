/**
 * Rows as the drivers return them, and their mapping to the domain. Both
 * drivers get timestamps as `YYYY-MM-DD HH:MM:SS.mmm` strings in UTC (mysql2
 * runs with `dateStrings`, SQLite stores text), so one parser serves both.
 */
import { fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentRecord } from "./repository.js";

/** A row of `agent_definitions`. */
export interface AgentDefinitionRow {
  readonly id: string;
  /** Insertion order; mysql2 may answer a BIGINT as a string. */
  readonly seq: number | string | bigint;
  readonly tenant: string;
  readonly name: string;
  readonly provider_id: string;
  readonly version: string;
  /** The definition as protobuf JSON. */
  readonly document: string;
  readonly created_at: DatabaseTimestamp;
  readonly updated_at: DatabaseTimestamp;
}

/** The columns an insert writes; `seq` is assigned by the database. */
export type NewAgentDefinitionRow = Omit<AgentDefinitionRow, "seq">;

/** A row of `tenants`. */
export interface TenantRow {
  readonly name: string;
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
    definition: fromDocument(row.document),
    createdAt: fromDatabaseTimestamp(row.created_at),
    updatedAt: fromDatabaseTimestamp(row.updated_at),
  };
}
