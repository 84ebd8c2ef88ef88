/**
 * Provider key sets (issue 43, item 2): one row per provider that has had keys in a tenant, written by every
 * change of its keys (`changes = changes + 1`) as the change's first statement. The row orders the changes of
 * one provider's set: its lock makes a second change wait for the first (a lock on the provider's key rows
 * would not, when it has none yet: two first sets would both insert), and on a Galera cluster two changes
 * through two nodes write the same row, so one loses at certification and runs again, as writers of one agent
 * do on `agents.lock_count` (migration 0012). A table of its own rather than a row of `tenants`, which agent
 * creators hold while they take a number.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createProviderKeySets = createTableMigration("0019-create-provider-key-sets", "provider_key_sets", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS provider_key_sets (
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The tenant.',
        provider_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'The provider (provider.id); compared exactly.',
        changes BIGINT NOT NULL
          COMMENT 'How many changes the provider''s keys have had; each change writes it first.',
        PRIMARY KEY (tenant, provider_id),
        CONSTRAINT fk_provider_key_sets_tenant FOREIGN KEY (tenant) REFERENCES tenants (name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='One row per provider with keys in a tenant: what orders the changes of its keys.'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS provider_key_sets (
        tenant VARCHAR(63) NOT NULL CONSTRAINT fk_provider_key_sets_tenant REFERENCES tenants (name),
        provider_id VARCHAR(255) NOT NULL,
        changes BIGINT NOT NULL,
        CONSTRAINT pk_provider_key_sets PRIMARY KEY (tenant, provider_id)
      ) WITHOUT ROWID
    `,
  ],
});
