/**
 * The tenant admin's queries (issue 43, item 2): tenant settings and provider keys, cold paths on knex's
 * query builder. Each takes the transaction (or knex) to run on.
 */
import type { ProviderKeyRow, TenantSettingsRow } from "../key-rows.js";
import { providerKeySets, providerKeys, tenantSettings, tenants } from "./tables.js";
import type { QueryContext } from "./tenants.js";

const keyColumns = ["tenant", "provider_id", "kid", "alg", "jwk", "created_at", "revoked_at"];

/** Whether the tenant has been set up. */
export async function tenantIsSetUp({ tx }: QueryContext, name: string): Promise<boolean> {
  return (await tx(tenants).select("name").where({ name }).first()) !== undefined;
}

/**
 * Counts a change of the provider's keys on its `provider_key_sets` row (made at its first): the change's
 * first statement, whose row lock orders the changes of one provider's set, and whose write makes two of them
 * through two Galera nodes conflict at certification (migration 0019).
 */
export async function countKeyChange({ tx }: QueryContext, tenant: string, providerId: string): Promise<void> {
  await tx(providerKeySets)
    .insert({ tenant, provider_id: providerId, changes: 1 })
    .onConflict(["tenant", "provider_id"])
    .merge({ changes: tx.raw("?? + 1", [`${providerKeySets}.changes`]) });
}

/** The tenant's settings row, or undefined when it never changed a setting. */
export async function findSettings({ tx }: QueryContext, tenant: string): Promise<TenantSettingsRow | undefined> {
  return (await tx(tenantSettings).select(["tenant", "signatures", "discovery"]).where({ tenant }).first()) as
    | TenantSettingsRow
    | undefined;
}

/** Every settings row (the tenants that changed a setting). */
export async function listSettings({ tx }: QueryContext): Promise<TenantSettingsRow[]> {
  return (await tx(tenantSettings).select(["tenant", "signatures", "discovery"])) as TenantSettingsRow[];
}

/**
 * Sets the settings `columns` names of `tenant`, making its row when it has none (the other columns then take
 * their defaults).
 */
export async function upsertSettings(
  { tx }: QueryContext,
  tenant: string,
  columns: Readonly<Record<string, string>>,
  updatedAt: string,
): Promise<void> {
  const changed = { ...columns, updated_at: updatedAt };
  await tx(tenantSettings)
    .insert({ tenant, ...changed })
    .onConflict("tenant")
    .merge(Object.keys(changed));
}

/** The provider's keys, active and revoked, by kid. */
export async function findProviderKeys(
  { tx }: QueryContext,
  tenant: string,
  providerId: string,
): Promise<ProviderKeyRow[]> {
  return (await tx(providerKeys)
    .select(keyColumns)
    .where({ tenant, provider_id: providerId })
    .orderBy("kid", "asc")) as ProviderKeyRow[];
}

/** One key of the provider by its kid, active or revoked, or undefined. */
export async function findProviderKey(
  { tx }: QueryContext,
  tenant: string,
  providerId: string,
  kid: string,
): Promise<ProviderKeyRow | undefined> {
  return (await tx(providerKeys).select(keyColumns).where({ tenant, provider_id: providerId, kid }).first()) as
    | ProviderKeyRow
    | undefined;
}

/** Inserts keys; a kid the provider has fails with the driver's duplicate-key error. */
export async function insertProviderKeys({ tx }: QueryContext, rows: readonly ProviderKeyRow[]): Promise<void> {
  if (rows.length > 0) await tx(providerKeys).insert(rows);
}

/** Marks the provider's active keys `kids` revoked at `revokedAt`. */
export async function revokeProviderKeys(
  { tx }: QueryContext,
  tenant: string,
  providerId: string,
  kids: readonly string[],
  revokedAt: string,
): Promise<void> {
  if (kids.length === 0) return;
  await tx(providerKeys)
    .update({ revoked_at: revokedAt })
    .where({ tenant, provider_id: providerId })
    .whereIn("kid", kids)
    .whereNull("revoked_at");
}
