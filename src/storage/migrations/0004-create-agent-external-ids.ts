/**
 * Which agent holds an externalAgentID for a provider. The primary key makes
 * an externalAgentID unique per (tenant, provider) across agents (A3015) in
 * the database; versions of one agent share their agent's claim.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createAgentExternalIds = createTableMigration("0004-create-agent-external-ids", "agent_external_ids", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS agent_external_ids (
        tenant VARCHAR(63) ${text} NOT NULL
          COMMENT 'The owning tenant.',
        provider_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'provider.id the externalAgentID is unique within; compared exactly.',
        external_agent_id VARCHAR(255) ${text} NOT NULL
          COMMENT 'The externalAgentID; compared exactly.',
        agent_number BIGINT NOT NULL
          COMMENT 'The agent holding it.',
        created_at DATETIME(3) NOT NULL
          COMMENT 'When the agent claimed it (UTC).',
        PRIMARY KEY (tenant, provider_id, external_agent_id),
        KEY ix_agent_external_ids_agent (tenant, agent_number),
        CONSTRAINT fk_agent_external_ids_agent FOREIGN KEY (tenant, agent_number) REFERENCES agents (tenant, number)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='externalAgentIDs claimed by agents; one agent per (tenant, provider_id, external_agent_id).'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS agent_external_ids (
        tenant VARCHAR(63) NOT NULL,
        provider_id VARCHAR(255) NOT NULL,
        external_agent_id VARCHAR(255) NOT NULL,
        agent_number BIGINT NOT NULL,
        created_at DATETIME NOT NULL,
        CONSTRAINT pk_agent_external_ids PRIMARY KEY (tenant, provider_id, external_agent_id),
        CONSTRAINT fk_agent_external_ids_agent FOREIGN KEY (tenant, agent_number) REFERENCES agents (tenant, number)
      )
    `,
    "CREATE INDEX IF NOT EXISTS ix_agent_external_ids_agent ON agent_external_ids (tenant, agent_number)",
  ],
});
