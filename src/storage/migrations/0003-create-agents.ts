/**
 * The agents: the lineage the versions of one agent share, numbered from the
 * tenant's sequence. The unique (tenant, provider_id, name) index is what
 * makes two concurrent creators of the same new agent collide, so that one of
 * them retries and joins the other's agent.
 */
import type { Knex } from "knex";
import { dialectOf, exactCollation } from "./dialect.js";
import type { Migration } from "./index.js";

export const createAgents: Migration = {
  name: "0003-create-agents",
  async up(db: Knex) {
    if (dialectOf(db) === "mysql") {
      await createForMysql(db, await exactCollation(db));
    } else {
      await createForSqlite(db);
    }
  },
  async down(db: Knex) {
    await db.schema.dropTable("agents");
  },
};

async function createForMysql(db: Knex, collation: string): Promise<void> {
  // `collation` comes from exactCollation's fixed list, never from input.
  const text = `CHARACTER SET utf8mb4 COLLATE ${collation}`;
  await db.raw(`
    CREATE TABLE agents (
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
  `);
}

async function createForSqlite(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE agents (
      tenant VARCHAR(63) NOT NULL CONSTRAINT fk_agents_tenant REFERENCES tenants (name),
      number BIGINT NOT NULL,
      reference_id VARCHAR(100) NOT NULL,
      provider_id VARCHAR(255) NOT NULL,
      name VARCHAR(255) NOT NULL,
      created_at DATETIME NOT NULL,
      CONSTRAINT pk_agents PRIMARY KEY (tenant, number)
    )
  `);
  await db.raw("CREATE UNIQUE INDEX uq_agents_reference_id ON agents (tenant, reference_id)");
  await db.raw("CREATE UNIQUE INDEX uq_agents_provider_name ON agents (tenant, provider_id, name)");
}
