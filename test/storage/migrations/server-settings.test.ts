/**
 * The server settings the migrations need on a Galera node
 * (migrations/server-settings.ts): named in the error of a start on a node
 * that lacks them while a migration that needs them is still to run, and
 * never asked of a single server (whose answers stay as they were).
 */
import { describe, expect, it } from "vitest";
import { migrations } from "../../../src/storage/migrations/index.js";
import {
  checkDurability,
  checkServerSettings,
  missingSettings,
  unsafeDurability,
} from "../../../src/storage/migrations/server-settings.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { testDatabases } from "../../support/databases.js";

const all = new Set(migrations.map((m) => m.name));
const ranBefore = (name: string) =>
  new Set(
    migrations
      .slice(
        0,
        migrations.findIndex((m) => m.name === name),
      )
      .map((m) => m.name),
  );
const server = (entries: Record<string, string>) => new Map(Object.entries(entries));
const galera = { wsrep_on: "ON", innodb_ft_enable_stopword: "OFF", log_bin_trust_function_creators: "ON" };

describe("the server settings the migrations need", () => {
  it("names stopwords and trigger creation on a Galera node that lacks them, before 0009", () => {
    const message = missingSettings(
      server({ ...galera, innodb_ft_enable_stopword: "ON", log_bin_trust_function_creators: "OFF" }),
      ranBefore("0009-add-search-index"),
    );
    expect(message).toContain("innodb_ft_enable_stopword = OFF (it is ON:");
    expect(message).toContain("log_bin_trust_function_creators = ON (it is OFF:");
    expect(message).toContain("docs/operations.md");
  });

  it("asks for trigger creation alone once 0009 has run, and nothing once every migration has", () => {
    const lacking = server({ ...galera, innodb_ft_enable_stopword: "ON", log_bin_trust_function_creators: "OFF" });
    const message = missingSettings(lacking, ranBefore("0010-add-term-counts"));
    expect(message).toContain("log_bin_trust_function_creators");
    expect(message).not.toContain("innodb_ft_enable_stopword");
    expect(missingSettings(lacking, all)).toBeUndefined();
  });

  it("asks nothing of a Galera node that has them, nor of a server that is not a Galera node", () => {
    expect(missingSettings(server(galera), new Set())).toBeUndefined();
    const single = { wsrep_on: "OFF", innodb_ft_enable_stopword: "ON", log_bin_trust_function_creators: "OFF" };
    expect(missingSettings(server(single), new Set())).toBeUndefined();
    expect(missingSettings(server({ innodb_ft_enable_stopword: "ON" }), new Set())).toBeUndefined();
  });

  it("refuses a Galera node that does not flush its log at every commit, whatever migrations are left", () => {
    for (const flush of ["0", "2"]) {
      const message = unsafeDurability(server({ ...galera, innodb_flush_log_at_trx_commit: flush }));
      expect(message).toContain(`innodb_flush_log_at_trx_commit = ${flush}`);
      expect(message).toContain("Set innodb_flush_log_at_trx_commit = 1");
    }
    expect(unsafeDurability(server({ ...galera, innodb_flush_log_at_trx_commit: "1" }))).toBeUndefined();
    // A single server is the operator's choice, as before.
    expect(unsafeDurability(server({ wsrep_on: "OFF", innodb_flush_log_at_trx_commit: "2" }))).toBeUndefined();
  });

  const mariadb = testDatabases().find((d) => d.name === "mariadb")!;
  it.skipIf(mariadb.skip)(
    "lets a fresh database on the test's single MariaDB be migrated, whatever its settings",
    async () => {
      const database = await mariadb.create();
      const direct = await openDatabase(database);
      try {
        await expect(checkServerSettings(direct.db)).resolves.toBeUndefined();
        await expect(checkDurability(direct.db)).resolves.toBeUndefined();
      } finally {
        await direct.db.destroy();
        await database.cleanup();
      }
    },
  );
});
