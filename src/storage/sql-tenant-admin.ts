/**
 * The tenant admin's store on SQL (issue 43, item 2): tenant settings and provider keys. Cold paths on knex,
 * all on the writer's connections, reads included: an admin reads back what it just set, and a replica may not
 * have it yet.
 */
import type { Knex } from "knex";
import {
  type Issue,
  invalid,
  issueAt,
  notFound,
  RegistryError,
  tenantNotFound,
  unavailable,
} from "../domain/errors.js";
import {
  DEFAULT_TENANT_SETTINGS,
  type KeyToHold,
  type ProviderKey,
  type ProviderKeyChange,
} from "../domain/tenant-admin.js";
import { type ProviderKeyRow, toProviderKey, toTenantSettings } from "./key-rows.js";
import {
  countKeyChange,
  findProviderKey,
  findProviderKeys,
  findSettings,
  insertProviderKeys,
  listSettings,
  revokeProviderKeys,
  tenantIsSetUp,
  upsertSettings,
} from "./queries/tenant-admin.js";
import type { QueryContext } from "./queries/tenants.js";
import type { TenantAdminStore } from "./repository.js";
import { toDatabaseTimestamp } from "./rows.js";
import type { Dialect } from "./run/connection.js";
import { classifyDriverError } from "./run/driver-errors.js";

/**
 * How many times a change is run when it lost a race (two admins setting the same provider's keys at once:
 * a duplicate kid, a deadlock, SQLite busy): each run reads the set afresh.
 */
const raceAttempts = 3;

export function createSqlTenantAdmin(db: Knex, dialect: Dialect): TenantAdminStore {
  const on = (tx: Knex | Knex.Transaction): QueryContext => ({ tx, dialect });
  const change = <T>(work: (context: QueryContext) => Promise<T>) => transact(db, (tx) => work(on(tx)));
  const read = <T>(work: (context: QueryContext) => Promise<T>) => guard(() => work(on(db)));
  return {
    settings: (tenant) =>
      read(async (context) => {
        const row = await findSettings(context, tenant);
        if (row !== undefined) return toTenantSettings(row);
        if (!(await tenantIsSetUp(context, tenant))) throw tenantNotFound(tenant);
        return DEFAULT_TENANT_SETTINGS;
      }),
    allSettings: () =>
      read(async (context) => new Map((await listSettings(context)).map((row) => [row.tenant, toTenantSettings(row)]))),
    updateSettings: (tenant, settings) =>
      change(async (context) => {
        if (!(await tenantIsSetUp(context, tenant))) throw tenantNotFound(tenant);
        const columns: Record<string, string> = {};
        if (settings.signatures !== undefined) columns.signatures = settings.signatures;
        if (settings.discovery !== undefined) columns.discovery = settings.discovery;
        if (Object.keys(columns).length > 0)
          await upsertSettings(context, tenant, columns, toDatabaseTimestamp(new Date()));
        const row = await findSettings(context, tenant);
        return row === undefined ? DEFAULT_TENANT_SETTINGS : toTenantSettings(row);
      }),
    providerKeys: (tenant, providerId) =>
      read(async (context) => {
        if (!(await tenantIsSetUp(context, tenant))) throw tenantNotFound(tenant);
        return (await findProviderKeys(context, tenant, providerId)).map(toProviderKey);
      }),
    providerKey: (tenant, providerId, kid) =>
      read(async (context) => {
        const row = await findProviderKey(context, tenant, providerId, kid);
        return row === undefined ? undefined : toProviderKey(row);
      }),
    setProviderKeys: (tenant, providerId, keys) => change((context) => replaceKeys(context, tenant, providerId, keys)),
    revokeProviderKey: (tenant, providerId, kid) =>
      change(async (context) => {
        if (!(await tenantIsSetUp(context, tenant))) throw tenantNotFound(tenant);
        // The set's lock first, so two revocations of one key decide one after the other (one revokes it).
        await countKeyChange(context, tenant, providerId);
        const key = await findProviderKey(context, tenant, providerId, kid);
        if (key === undefined) throw notFound(`Key "${kid}" of provider "${providerId}"`, "kid");
        const revoked = key.revoked_at === null ? [kid] : [];
        await revokeProviderKeys(context, tenant, providerId, revoked, toDatabaseTimestamp(new Date()));
        return { keys: await keysOf(context, tenant, providerId), revoked };
      }),
  };
}

/**
 * Makes `keys` the provider's active set: the ones it holds stay as they are (their creation time too), new
 * ones are added, the active ones left out are revoked. A kid the provider holds for another key, or held and
 * revoked, is refused (nothing written), naming the key's place in the set.
 */
async function replaceKeys(
  context: QueryContext,
  tenant: string,
  providerId: string,
  keys: readonly KeyToHold[],
): Promise<ProviderKeyChange> {
  if (!(await tenantIsSetUp(context, tenant))) throw tenantNotFound(tenant);
  await countKeyChange(context, tenant, providerId);
  const held = new Map((await findProviderKeys(context, tenant, providerId)).map((row) => [row.kid, row]));
  const issues = keys.flatMap((key, i): Issue[] => {
    const row = held.get(key.kid);
    const path = `keys[${i}].kid`;
    if (row?.revoked_at === null && row.jwk === key.jwk && row.alg === key.alg) return [];
    if (row === undefined) return [];
    const what = `key "${key.kid}" of provider "${providerId}"`;
    return row.revoked_at !== null
      ? [issueAt(path, "KID_REVOKED", `${path}: ${what} was revoked; a revoked kid cannot be set again.`)]
      : [issueAt(path, "KID_TAKEN", `${path}: ${what} is another key; a different key needs a new kid.`)];
  });
  if (issues.length > 0) throw invalid(issues);
  const now = toDatabaseTimestamp(new Date());
  const added: ProviderKeyRow[] = keys
    .filter((key) => !held.has(key.kid))
    .map((key) => ({ tenant, provider_id: providerId, ...key, created_at: now, revoked_at: null }));
  const kept = new Set(keys.map((key) => key.kid));
  const revoked = [...held.values()].filter((row) => row.revoked_at === null && !kept.has(row.kid)).map((r) => r.kid);
  await insertProviderKeys(context, added);
  await revokeProviderKeys(context, tenant, providerId, revoked, now);
  return { keys: await keysOf(context, tenant, providerId), revoked };
}

async function keysOf(context: QueryContext, tenant: string, providerId: string): Promise<ProviderKey[]> {
  return (await findProviderKeys(context, tenant, providerId)).map(toProviderKey);
}

/** Runs `work` in a transaction, again after a lost race (raceAttempts); failures leave as RegistryError. */
async function transact<T>(db: Knex, work: (tx: Knex.Transaction) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction(work);
    } catch (error) {
      if (error instanceof RegistryError) throw error;
      if (attempt < raceAttempts && classifyDriverError(error) === "retryable") continue;
      throw translate(error);
    }
  }
}

async function guard<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw translate(error);
  }
}

/** A driver's failure as the repository answers it: `UNAVAILABLE` when the database cannot be reached. */
export function translate(error: unknown): unknown {
  if (error instanceof RegistryError) return error;
  return classifyDriverError(error) === "unavailable" ? unavailable(error) : error;
}
