/**
 * Liveness and drift (issue 44): what the prober found at each version's agent, and its schedule, in a table of
 * their own, so a probe never rewrites a definition's row or documents.
 *
 * - The published columns (`state`, `drift`, `liveness`) are what reads answer as `meta.liveness` and what the
 *   list's `liveness` and `drift` filters compare. They change only when a probe changes `state` or `drift`, in a
 *   write transaction that takes a tenant revision and appends a LIVENESS_CHANGED change record (the change log's
 *   `kind` is VARCHAR(16): the name fits exactly). `liveness` is the member's protobuf JSON as answered; NULL, and
 *   a version with no row, read as NOT_PROBED.
 * - The schedule's columns (`failures`, `probe_due_at`, `lease_until`, `lease_owner`) move at every probe and are
 *   never answered: a process takes a batch of due rows by setting their lease (MariaDB `FOR UPDATE SKIP LOCKED`,
 *   SQLite's one writer a plain UPDATE), probes them, and sets the next due time; a process killed meanwhile leaves
 *   leases that expire, and another takes the rows. `failures` counts the failed probes in a row (DOWN after
 *   PROBE_DOWN_AFTER), kept here so a failure that changes no state writes nothing a reader sees.
 * - The due index is what the claim reads: the rows due first.
 *
 * No foreign key: a row names a version (definitions are never deleted) and is written by the prober only. Run
 * again after a run that died halfway, CREATE TABLE IF NOT EXISTS finds the table there.
 */
import { createTableMigration } from "./create-table-migration.js";

export const addDefinitionLiveness = createTableMigration("0021-add-definition-liveness", "definition_liveness", {
  mysql: (text, collation) => `
      CREATE TABLE IF NOT EXISTS definition_liveness (
        tenant VARCHAR(63) ${text} NOT NULL COMMENT 'The tenant.',
        definition_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
          COMMENT 'The version probed (agent_definitions.id).',
        state VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'NOT_PROBED'
          COMMENT 'UP, DOWN or NOT_PROBED, as meta.liveness.state answers it.',
        drift VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL
          COMMENT 'NONE, COMPATIBLE or BREAKING, as meta.liveness.drift; NULL until a probe found a card.',
        liveness TEXT ${text} NULL COMMENT 'meta.liveness as protobuf JSON; NULL: NOT_PROBED.',
        failures INT NOT NULL DEFAULT 0 COMMENT 'Failed probes in a row (the schedule''s count, never answered).',
        probe_due_at DATETIME(3) NOT NULL COMMENT 'When the next probe is due (UTC).',
        lease_until DATETIME(3) NULL COMMENT 'A process probes it until then (UTC); NULL: nobody.',
        lease_owner CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL COMMENT 'The process that holds the lease.',
        PRIMARY KEY (tenant, definition_id),
        KEY ix_definition_liveness_due (probe_due_at)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
        COMMENT='What the prober found at each version''s agent (meta.liveness), and when to probe it next.'
    `,
  sqlite: [
    `
      CREATE TABLE IF NOT EXISTS definition_liveness (
        tenant VARCHAR(63) NOT NULL,
        definition_id CHAR(32) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'NOT_PROBED',
        drift VARCHAR(16) NULL,
        liveness TEXT NULL,
        failures INTEGER NOT NULL DEFAULT 0,
        probe_due_at DATETIME NOT NULL,
        lease_until DATETIME NULL,
        lease_owner CHAR(32) NULL,
        CONSTRAINT pk_definition_liveness PRIMARY KEY (tenant, definition_id)
      )
    `,
    "CREATE INDEX IF NOT EXISTS ix_definition_liveness_due ON definition_liveness (probe_due_at)",
  ],
});
