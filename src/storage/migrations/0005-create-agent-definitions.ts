/**
 * The definitions: one row per instance (version of an agent), the definition
 * itself kept as protobuf JSON beside the exact upsert key.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createAgentDefinitions = createTableMigration("0005-create-agent-definitions", "agent_definitions", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS agent_definitions (
        id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
          COMMENT 'The instance id: 32 lowercase hex characters, assigned by the registry on create, never changed.',
        seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT
          COMMENT 'Insertion order, so listing is stable; not an identity.',
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The owning tenant; part of the upsert key.',
        name VARCHAR(255) ${text} NOT NULL
          COMMENT 'The definition name; part of the upsert key, compared exactly.',
        provider_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'provider.id of the definition; part of the upsert key, compared exactly.',
        version VARCHAR(128) ${text} NOT NULL
          COMMENT 'The definition version; part of the upsert key, compared exactly.',
        agent_number BIGINT NOT NULL
          COMMENT 'The agent (agents.number) this instance is a version of.',
        document LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL
          COMMENT 'The definition as protobuf JSON (asor.v1.AgentDefinition), id and reference_id included.',
        created_at DATETIME(3) NOT NULL
          COMMENT 'When the instance was created (UTC).',
        updated_at DATETIME(3) NOT NULL
          COMMENT 'When the instance was last written (UTC).',
        PRIMARY KEY (id),
        UNIQUE KEY uq_agent_definitions_seq (seq),
        UNIQUE KEY uq_agent_definitions_key (tenant, name, provider_id, version),
        KEY ix_agent_definitions_tenant_seq (tenant, seq),
        KEY ix_agent_definitions_agent_seq (tenant, agent_number, seq),
        CONSTRAINT fk_agent_definitions_tenant FOREIGN KEY (tenant) REFERENCES tenants (name),
        CONSTRAINT fk_agent_definitions_agent FOREIGN KEY (tenant, agent_number) REFERENCES agents (tenant, number)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='Agent definitions; one row per (tenant, name, provider_id, version).'
    `,
  // SQLite compares TEXT with BINARY by default: already exact. It has no
  // auto-increment outside the primary key, so the insert assigns seq (see queries/writes.ts);
  // its single writer makes MAX(seq) + 1 safe.
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS agent_definitions (
        id CHAR(32) NOT NULL PRIMARY KEY,
        seq INTEGER NOT NULL,
        tenant VARCHAR(63) NOT NULL CONSTRAINT fk_agent_definitions_tenant REFERENCES tenants (name),
        name VARCHAR(255) NOT NULL,
        provider_id VARCHAR(255) NOT NULL,
        version VARCHAR(128) NOT NULL,
        agent_number BIGINT NOT NULL,
        document TEXT NOT NULL,
        created_at DATETIME NOT NULL,
        updated_at DATETIME NOT NULL,
        CONSTRAINT fk_agent_definitions_agent FOREIGN KEY (tenant, agent_number) REFERENCES agents (tenant, number)
      )
    `,
    "CREATE UNIQUE INDEX IF NOT EXISTS uq_agent_definitions_seq ON agent_definitions (seq)",
    "CREATE UNIQUE INDEX IF NOT EXISTS uq_agent_definitions_key ON agent_definitions (tenant, name, provider_id, version)",
    "CREATE INDEX IF NOT EXISTS ix_agent_definitions_tenant_seq ON agent_definitions (tenant, seq)",
    "CREATE INDEX IF NOT EXISTS ix_agent_definitions_agent_seq ON agent_definitions (tenant, agent_number, seq)",
  ],
});
