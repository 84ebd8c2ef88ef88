/**
 * The agents: the lineage the versions of one agent share, numbered from the
 * tenant's sequence. The unique (tenant, provider_id, name) index is what
 * makes two concurrent creators of the same new agent collide, so that one of
 * them retries and joins the other's agent.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createAgents = createTableMigration("0003-create-agents", "agents", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS agents (
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The owning tenant.',
        number BIGINT NOT NULL
          COMMENT 'The agent''s number in the tenant''s sequence: 1, 2, 3... without gaps.',
        reference_id VARCHAR(100) ${text} NOT NULL
          COMMENT 'Agent_ID=<prefix><number>, as answered in reference_id.',
        provider_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'provider.id of the agent''s first version; compared exactly.',
        name VARCHAR(255) ${text} NOT NULL
          COMMENT 'The name of the agent''s first version; compared exactly.',
        created_at DATETIME(3) NOT NULL
          COMMENT 'When the agent was created with its first version (UTC).',
        PRIMARY KEY (tenant, number),
        UNIQUE KEY uq_agents_reference_id (tenant, reference_id),
        UNIQUE KEY uq_agents_provider_name (tenant, provider_id, name),
        CONSTRAINT fk_agents_tenant FOREIGN KEY (tenant) REFERENCES tenants (name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='Agents: the lineages that versions (agent_definitions) belong to.'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS agents (
        tenant VARCHAR(63) NOT NULL CONSTRAINT fk_agents_tenant REFERENCES tenants (name),
        number BIGINT NOT NULL,
        reference_id VARCHAR(100) NOT NULL,
        provider_id VARCHAR(255) NOT NULL,
        name VARCHAR(255) NOT NULL,
        created_at DATETIME NOT NULL,
        CONSTRAINT pk_agents PRIMARY KEY (tenant, number)
      )
    `,
    "CREATE UNIQUE INDEX IF NOT EXISTS uq_agents_reference_id ON agents (tenant, reference_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS uq_agents_provider_name ON agents (tenant, provider_id, name)",
  ],
});
