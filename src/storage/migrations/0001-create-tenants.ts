/**
 * The tenants: a definition can only be stored in a tenant that has been set
 * up. A tenant's setup holds its agent id sequence generator (a prefix and the
 * next number), which new agents take their reference ids from.
 */
import { createTableMigration } from "./create-table-migration.js";

export const createTenants = createTableMigration("0001-create-tenants", "tenants", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS tenants (
        name VARCHAR(63) ${text} NOT NULL
          COMMENT 'The tenant name as it appears in the API path; compared exactly.',
        sequence_prefix VARCHAR(32) ${text} NULL
          COMMENT 'Prefix of the agent id sequence: agents get Agent_ID=<prefix><number>. NULL: no sequence generator, no new agents.',
        next_agent_number BIGINT NOT NULL DEFAULT 1
          COMMENT 'The number the next new agent takes; raised in the transaction that creates the agent, so numbers have no gaps.',
        created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
          COMMENT 'When the tenant was set up (UTC).',
        PRIMARY KEY (name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='Tenants that have been set up; definitions belong to one.'
    `,
  // SQLite compares TEXT with BINARY by default: already exact. The default
  // timestamp is UTC with milliseconds, the format rows.ts reads on both dialects.
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS tenants (
        name VARCHAR(63) NOT NULL PRIMARY KEY,
        sequence_prefix VARCHAR(32) NULL,
        next_agent_number BIGINT NOT NULL DEFAULT 1,
        created_at DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
      )
    `,
  ],
});
