/**
 * Revisions in commit order (issue 20, item 1): each tenant has a revision
 * counter, every write that changes what a read answers takes the next
 * revision(s) in its own transaction and appends one change record per
 * definition it changed, and each definition remembers the revision that last
 * changed it.
 *
 * - `tenant_revisions`: one row per tenant, its revision counter. A table of
 *   its own, not a column of `tenants`: creators of agents hold the tenant's
 *   row locked from taking a number until they commit, and every writer of the
 *   tenant takes the counter's lock as its last statement before COMMIT, so
 *   a column there would make updates queue behind
 *   creators and could deadlock with them. Its row lock orders the tenant's
 *   writers: revision order is commit order. A reader finds every tenant that
 *   moved with one scan of this small table.
 * - `definition_changes`: the change log, keyed (tenant, revision): reading a
 *   tenant forward from a revision and deleting below one are ranges of the
 *   primary key. No foreign keys (an insert checks nothing; compaction deletes
 *   freely).
 * - `agent_definitions.mod_revision`: the revision that last changed the
 *   version, on the row every read reads already.
 * - `asor_commit_revisions(tenant, changes)` (MySQL only): a procedure that
 *   ends a write: it takes the write's revisions, sets each changed version's
 *   mod_revision, appends the change records, COMMITs and answers the last
 *   revision; given a version's new content (`p_content_id`, a POST or PUT
 *   of an existing key), it writes that too, in the UPDATE that sets its
 *   mod_revision; given also `p_agent_number`, the content is a new agent's
 *   staged version (migration 0014), numbered in that UPDATE: the statement
 *   that numbered it was the last round trip of the section a tenant's new
 *   agents pass one at a time (its sequence row is held to COMMIT), and with
 *   it folded in that section ends with the CALL, as it ended with COMMIT.
 *   The counter's lock is then held for the server's own work
 *   only, never across a round trip to the service: sent as statements, one
 *   round trip each and COMMIT after them, the lock was held through four
 *   round trips, and on a loaded machine each waits for the service's event
 *   loop (POST of an existing key 0.54-0.66x of its throughput without
 *   revisions, with the CALL before a COMMIT of its own 0.81-0.88x; issue
 *   20's limit is 0.9x; BENCHMARKS.md). `changes` is a JSON array of [id,
 *   kind, agent number, changed at], in the order of the revisions they
 *   take, read with JSON_EXTRACT in a loop (MySQL 5.7+, MariaDB 10.2+; not
 *   JSON_TABLE, MariaDB 10.6+). SQL SECURITY INVOKER: it runs with the
 *   service's own rights, whoever migrated. Its UPDATEs name the primary
 *   key (FORCE INDEX): under 200 POSTs over 10 keys from two processes,
 *   InnoDB reported deadlocks in which the CALL's UPDATE of its own version,
 *   holding the counter, waited ("fetching rows") on another version's row,
 *   held by a writer queued on the counter (1,146 retries in one run, the
 *   test's 200 POSTs 2-6 s instead of 1.2); with the hint none in 3 runs,
 *   1.2-2.8 s. Why the plan left the primary key there was not found
 *   (EXPLAIN and the handler counters of a single CALL show a key lookup).
 *
 * The definitions stored before it get revisions 1..n per tenant in the order
 * they were last written (updated_at, then seq), one ADDED record each, and
 * the tenant's counter n: a watcher from 0 sees every definition once, as a
 * list would. Run again after a run that died halfway, it drops what it made
 * and makes it again from the definitions, which nothing writes meanwhile.
 */
import type { Knex } from "knex";
import { dialectOf, exactCollation } from "./dialect.js";
import type { Migration } from "./index.js";

const definitions = "agent_definitions";
const column = "mod_revision";
const procedure = "asor_commit_revisions";

export const addRevisions: Migration = {
  name: "0015-add-revisions",
  async up(db) {
    const mysql = dialectOf(db) === "mysql";
    if (mysql) await db.raw(`DROP PROCEDURE IF EXISTS ${procedure}`);
    await db.raw("DROP TABLE IF EXISTS definition_changes");
    await db.raw("DROP TABLE IF EXISTS tenant_revisions");
    if (mysql) await createMysql(db);
    else await createSqlite(db);
    await backfill(db, mysql);
  },
  async down(db) {
    if (dialectOf(db) === "mysql") await db.raw(`DROP PROCEDURE IF EXISTS ${procedure}`);
    await db.raw("DROP TABLE IF EXISTS definition_changes");
    await db.raw("DROP TABLE IF EXISTS tenant_revisions");
    if (await db.schema.hasColumn(definitions, column))
      await db.raw(`ALTER TABLE ${definitions} DROP COLUMN ${column}`);
  },
};

async function createMysql(db: Knex): Promise<void> {
  const collation = await exactCollation(db);
  const text = `CHARACTER SET utf8mb4 COLLATE ${collation}`;
  await db.raw(`
    CREATE TABLE tenant_revisions (
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'The tenant (tenants.name).',
      revision BIGINT NOT NULL COMMENT 'The revision of the tenant''s last committed change; 0 before any.',
      PRIMARY KEY (tenant)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='Each tenant''s revision counter: every write takes the next revision(s) as its last step before COMMIT.'
  `);
  await db.raw(`
    CREATE TABLE definition_changes (
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'The tenant.',
      revision BIGINT NOT NULL COMMENT 'The tenant revision this change took.',
      kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'ADDED, MODIFIED or STATUS_CHANGED.',
      definition_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
        COMMENT 'The version changed (agent_definitions.id).',
      agent_number BIGINT NOT NULL COMMENT 'Its agent (agents.number).',
      changed_at DATETIME(3) NOT NULL COMMENT 'When the change was made (UTC).',
      PRIMARY KEY (tenant, revision)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='The change log: one row per changed definition per revision, read forward from a revision.'
  `);
  // The i-th change (from 0) of n takes revision last - n + 1 + i.
  const item = (field: number) => `JSON_UNQUOTE(JSON_EXTRACT(p_changes, CONCAT('$[', i, '][${field}]')))`;
  await db.raw(`
    CREATE PROCEDURE ${procedure}(
      IN p_tenant VARCHAR(63) ${text},
      IN p_changes LONGTEXT,
      IN p_content_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin,
      IN p_document LONGBLOB,
      IN p_binary LONGBLOB,
      IN p_updated_at DATETIME(3),
      IN p_agent_number BIGINT
    )
      MODIFIES SQL DATA
      SQL SECURITY INVOKER
      COMMENT 'Ends a write: takes its revisions, sets mod_revision, appends the change records, commits (0015).'
    BEGIN
      DECLARE n INT DEFAULT JSON_LENGTH(p_changes);
      DECLARE i INT DEFAULT 0;
      DECLARE last BIGINT;
      DECLARE r BIGINT;
      DECLARE v_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
      INSERT INTO tenant_revisions (tenant, revision) VALUES (p_tenant, n)
        ON DUPLICATE KEY UPDATE revision = revision + n;
      SELECT revision INTO last FROM tenant_revisions WHERE tenant = p_tenant;
      WHILE i < n DO
        SET r = last - n + 1 + i;
        SET v_id = ${item(0)};
        IF v_id = p_content_id AND p_agent_number IS NOT NULL THEN
          UPDATE ${definitions} FORCE INDEX (PRIMARY) SET agent_number = p_agent_number, document = p_document,
            document_binary = p_binary, ${column} = r WHERE tenant = p_tenant AND id = v_id AND agent_number IS NULL;
          IF ROW_COUNT() <> 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'asor_commit_revisions: the version to number is not there';
          END IF;
        ELSEIF v_id = p_content_id THEN
          UPDATE ${definitions} FORCE INDEX (PRIMARY) SET document = p_document, document_binary = p_binary,
            updated_at = p_updated_at, revision = revision + 1, ${column} = r WHERE tenant = p_tenant AND id = v_id;
          IF ROW_COUNT() <> 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'asor_commit_revisions: the version to update is not there';
          END IF;
        ELSE
          UPDATE ${definitions} FORCE INDEX (PRIMARY) SET ${column} = r WHERE tenant = p_tenant AND id = v_id;
        END IF;
        INSERT INTO definition_changes (tenant, revision, kind, definition_id, agent_number, changed_at)
          VALUES (p_tenant, r, ${item(1)}, v_id, ${item(2)}, ${item(3)});
        SET i = i + 1;
      END WHILE;
      COMMIT;
      SELECT last AS revision;
    END
  `);
  if (!(await db.schema.hasColumn(definitions, column)))
    await db.raw(`
      ALTER TABLE ${definitions}
        ADD COLUMN ${column} BIGINT NOT NULL DEFAULT 0
          COMMENT 'The tenant revision (tenant_revisions) of the last change of this version.'
    `);
}

async function createSqlite(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE tenant_revisions (
      tenant VARCHAR(63) NOT NULL PRIMARY KEY,
      revision INTEGER NOT NULL
    )
  `);
  await db.raw(`
    CREATE TABLE definition_changes (
      tenant VARCHAR(63) NOT NULL,
      revision INTEGER NOT NULL,
      kind VARCHAR(16) NOT NULL,
      definition_id CHAR(32) NOT NULL,
      agent_number BIGINT NOT NULL,
      changed_at DATETIME NOT NULL,
      PRIMARY KEY (tenant, revision)
    ) WITHOUT ROWID
  `);
  if (!(await db.schema.hasColumn(definitions, column)))
    await db.raw(`ALTER TABLE ${definitions} ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`);
}

async function backfill(db: Knex, mysql: boolean): Promise<void> {
  const order = "PARTITION BY tenant ORDER BY updated_at, seq";
  const numbered = `SELECT seq, ROW_NUMBER() OVER (${order}) AS r FROM ${definitions}`;
  // MySQL cannot select from the table an UPDATE changes except through a derived table; SQLite
  // has UPDATE ... FROM (3.33+).
  await db.raw(
    mysql
      ? `UPDATE ${definitions} d JOIN (${numbered}) x ON x.seq = d.seq SET d.${column} = x.r`
      : `UPDATE ${definitions} SET ${column} = x.r FROM (${numbered}) AS x WHERE x.seq = ${definitions}.seq`,
  );
  await db.raw(`
    INSERT INTO definition_changes (tenant, revision, kind, definition_id, agent_number, changed_at)
    SELECT tenant, ${column}, 'ADDED', id, agent_number, updated_at FROM ${definitions}
  `);
  await db.raw(`
    INSERT INTO tenant_revisions (tenant, revision)
    SELECT t.name, COALESCE((SELECT MAX(d.${column}) FROM ${definitions} d WHERE d.tenant = t.name), 0) FROM tenants t
  `);
}
