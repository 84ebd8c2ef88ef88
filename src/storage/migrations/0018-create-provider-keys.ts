/**
 * Provider keys (issue 43, item 2): the public keys a tenant's admin sets for
 * a provider, the trust roots its submissions' signatures are verified
 * against. A key is never deleted: replacing a provider's set or revoking one
 * key sets `revoked_at`, so a signature under a revoked key can be told from
 * one under a key the registry never held, and a `kid` once used cannot come
 * back naming another key. Keyed (tenant, provider_id, kid): a verification
 * reads one key by its primary key, an admin's list one provider's range.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createProviderKeys = createTableMigration("0018-create-provider-keys", "provider_keys", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS provider_keys (
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The tenant whose trust root this is.',
        provider_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'The provider, as definitions name it (provider.id); compared exactly.',
        kid VARCHAR(128) ${text} NOT NULL
          COMMENT 'The key id (JWK kid); compared exactly.',
        alg VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
          COMMENT 'The one JWS algorithm the key verifies (ES256, EdDSA, RS256, PS256).',
        jwk TEXT ${text} NOT NULL
          COMMENT 'The public JWK as JSON text, as the registry validated it (public members only).',
        created_at DATETIME(3) NOT NULL
          COMMENT 'When the key was set (UTC).',
        revoked_at DATETIME(3) NULL
          COMMENT 'When the key was revoked (UTC); NULL while it is active.',
        PRIMARY KEY (tenant, provider_id, kid),
        CONSTRAINT fk_provider_keys_tenant FOREIGN KEY (tenant) REFERENCES tenants (name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='Providers'' public keys per tenant: the trust roots of signed submissions; revoked ones kept.'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS provider_keys (
        tenant VARCHAR(63) NOT NULL CONSTRAINT fk_provider_keys_tenant REFERENCES tenants (name),
        provider_id VARCHAR(255) NOT NULL,
        kid VARCHAR(128) NOT NULL,
        alg VARCHAR(16) NOT NULL,
        jwk TEXT NOT NULL,
        created_at DATETIME NOT NULL,
        revoked_at DATETIME NULL,
        CONSTRAINT pk_provider_keys PRIMARY KEY (tenant, provider_id, kid)
      ) WITHOUT ROWID
    `,
  ],
});
