/**
 * A new definition's row may be written before its agent is known, on
 * MySQL/MariaDB (issue 24, item 2): `agent_definitions.agent_number` may be
 * NULL, inside the transaction that creates the row and only there, and the
 * row no longer has a foreign key of its own to `tenants`.
 *
 * A new definition's row and its search index (its term rows and their
 * counters, and the keyword text) used to be written once its agent was
 * known, and a new agent is known once it has taken the tenant's next number:
 * so all that index work ran while the tenant's agent sequence was locked,
 * and every other creator of an agent in the tenant waited for it. The write
 * now inserts the row first with no agent (NULL: the foreign key to agents
 * checks nothing while the number is NULL), indexes it, then takes the agent
 * (the sequence) and sets the number and the document in one UPDATE before
 * it commits (write-transaction.ts, prepareInsert and insert). A committed row
 * always has its number: readers never see a NULL.
 *
 * The foreign key to `tenants` goes because checking it share-locks the
 * tenant's row until the transaction ends, and the tenant's row is the
 * agent sequence that the same writer, and every other creator, locks
 * exclusively next: two creators that had staged their rows each held the
 * row shared and waited for the other to let go (found by the test in
 * test/storage/write-races.test.ts, "lets another creator number its
 * agent..."). The tenant of a committed row is still checked, through its
 * agent: `fk_agent_definitions_agent` (tenant, agent_number) references
 * agents, whose own key references tenants.
 *
 * MySQL/MariaDB only: SQLite's writers run one at a time, so there is no
 * lock to shorten and the write inserts the row once its agent is known, as
 * before; its foreign keys stay. Each step checks whether it is done, so a
 * run that died halfway can run again (README.md, "Run again").
 */
import type { Knex } from "knex";
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const tenantKey = "fk_agent_definitions_tenant";
const comment =
  "The agent (agents.number) this instance is a version of. NULL only inside the transaction that creates the row, before its agent is numbered; never committed.";

async function agentNumberIsNullable(db: Knex): Promise<boolean> {
  const [rows] = (await db.raw(
    "SELECT IS_NULLABLE AS nullable FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'agent_definitions' AND COLUMN_NAME = 'agent_number'",
  )) as [Array<{ nullable: string }>];
  return rows[0]?.nullable === "YES";
}

async function hasTenantKey(db: Knex): Promise<boolean> {
  const [rows] = (await db.raw(
    "SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'agent_definitions' AND CONSTRAINT_NAME = ?",
    [tenantKey],
  )) as [unknown[]];
  return rows.length > 0;
}

export const allowUnnumberedDefinitions: Migration = {
  name: "0014-allow-unnumbered-definitions",
  async up(db) {
    if (dialectOf(db) !== "mysql") return;
    if (await hasTenantKey(db)) await db.raw(`ALTER TABLE agent_definitions DROP FOREIGN KEY ${tenantKey}`);
    if (!(await agentNumberIsNullable(db)))
      await db.raw(`ALTER TABLE agent_definitions MODIFY agent_number BIGINT NULL COMMENT '${comment}'`);
  },
  async down(db) {
    if (dialectOf(db) !== "mysql") return;
    if (await agentNumberIsNullable(db))
      await db.raw(
        "ALTER TABLE agent_definitions MODIFY agent_number BIGINT NOT NULL COMMENT 'The agent (agents.number) this instance is a version of.'",
      );
    if (!(await hasTenantKey(db)))
      await db.raw(
        `ALTER TABLE agent_definitions ADD CONSTRAINT ${tenantKey} FOREIGN KEY (tenant) REFERENCES tenants (name)`,
      );
  },
};
