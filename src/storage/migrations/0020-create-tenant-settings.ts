/**
 * Tenant settings (issue 43, item 2): one row per tenant that changed a
 * setting, one column per setting, each with its default; a tenant without
 * a row has every default, so neither this migration nor a tenant's creation
 * writes rows. A later setting is a later migration adding its column with
 * its default (a typed, checked column rather than name/value rows: the
 * database holds only values the setting allows).
 */
import { createTableMigration } from "./create-table-migration.js";

export const createTenantSettings = createTableMigration("0020-create-tenant-settings", "tenant_settings", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS tenant_settings (
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The tenant (tenants.name).',
        signatures VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'OPTIONAL'
          COMMENT 'What the tenant requires of submissions'' signatures: OPTIONAL, REQUIRED_FOR_KEYED_PROVIDERS, REQUIRED.',
        discovery VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'TOKEN'
          COMMENT 'Who may read the tenant''s discovery routes: TOKEN (its tokens) or PUBLIC (anyone).',
        updated_at DATETIME(3) NOT NULL
          COMMENT 'When a setting was last changed (UTC).',
        PRIMARY KEY (tenant),
        CONSTRAINT ck_tenant_settings_signatures CHECK (signatures IN ('OPTIONAL', 'REQUIRED_FOR_KEYED_PROVIDERS', 'REQUIRED')),
        CONSTRAINT ck_tenant_settings_discovery CHECK (discovery IN ('TOKEN', 'PUBLIC')),
        CONSTRAINT fk_tenant_settings_tenant FOREIGN KEY (tenant) REFERENCES tenants (name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='Tenants'' settings, one column each; a tenant without a row has the defaults.'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS tenant_settings (
        tenant VARCHAR(63) NOT NULL PRIMARY KEY CONSTRAINT fk_tenant_settings_tenant REFERENCES tenants (name),
        signatures VARCHAR(32) NOT NULL DEFAULT 'OPTIONAL'
          CONSTRAINT ck_tenant_settings_signatures CHECK (signatures IN ('OPTIONAL', 'REQUIRED_FOR_KEYED_PROVIDERS', 'REQUIRED')),
        discovery VARCHAR(16) NOT NULL DEFAULT 'TOKEN'
          CONSTRAINT ck_tenant_settings_discovery CHECK (discovery IN ('TOKEN', 'PUBLIC')),
        updated_at DATETIME NOT NULL
      )
    `,
  ],
});
