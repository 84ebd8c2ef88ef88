/** The rows of the tenant admin's tables (provider_keys, tenant_settings) and their mapping to the domain. */
import {
  DISCOVERY_POLICIES,
  type ProviderKey,
  SIGNATURE_POLICIES,
  type TenantSettings,
} from "../domain/tenant-admin.js";
import { type DatabaseTimestamp, fromDatabaseTimestamp } from "./rows.js";

/** A row of `provider_keys` (migration 0018). */
export interface ProviderKeyRow {
  readonly tenant: string;
  readonly provider_id: string;
  readonly kid: string;
  readonly alg: string;
  readonly jwk: string;
  readonly created_at: DatabaseTimestamp;
  readonly revoked_at: DatabaseTimestamp | null;
}

/** A row of `tenant_settings` (migration 0020). */
export interface TenantSettingsRow {
  readonly tenant: string;
  readonly signatures: string;
  readonly discovery: string;
}

export function toProviderKey(row: ProviderKeyRow): ProviderKey {
  return {
    kid: row.kid,
    alg: row.alg,
    jwk: row.jwk,
    createdAt: fromDatabaseTimestamp(row.created_at),
    revokedAt: row.revoked_at === null ? null : fromDatabaseTimestamp(row.revoked_at),
  };
}

export function toTenantSettings(row: TenantSettingsRow): TenantSettings {
  const signatures = SIGNATURE_POLICIES.find((p) => p === row.signatures);
  // The column's CHECK allows these only; another value is a database changed by hand.
  if (signatures === undefined) throw new Error(`Unreadable tenant_settings.signatures: ${row.signatures}`);
  const discovery = DISCOVERY_POLICIES.find((p) => p === row.discovery);
  if (discovery === undefined) throw new Error(`Unreadable tenant_settings.discovery: ${row.discovery}`);
  return { signatures, discovery };
}
