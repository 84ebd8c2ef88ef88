/**
 * Runs once per vitest run: finds out whether a MySQL/MariaDB server is
 * reachable, so the MySQL half of every database suite runs or is skipped
 * loudly (and fails the run under CI, where a skipped suite would hide bugs),
 * unless TEST_MYSQL_URL=off asks for a run without it (mysqlSuiteOff).
 */
import { createConnection } from "mysql2/promise";
import type { TestProject } from "vitest/node";
import { defaultTestMysqlUrl, mysqlConnectionOptions, mysqlSuiteOff } from "./mysql-url.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The server URL (no database) for the MySQL suite, or null when it is skipped. */
    mysqlUrl: string | null;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  if (mysqlSuiteOff()) {
    process.stderr.write("\nMySQL suite off (TEST_MYSQL_URL=off): SQLite only.\n\n");
    project.provide("mysqlUrl", null);
    return;
  }
  const url = process.env.TEST_MYSQL_URL ?? defaultTestMysqlUrl;
  const problem = await probe(url);
  if (problem === undefined) {
    project.provide("mysqlUrl", url);
    return;
  }
  const where = redact(url);
  if (process.env.CI === "true") {
    throw new Error(`MySQL suite cannot run under CI: no MySQL server at ${where} (${problem}). Set TEST_MYSQL_URL.`);
  }
  process.stderr.write(
    `\n*** MySQL suite SKIPPED: no MySQL server at ${where} (${problem}); set TEST_MYSQL_URL. ***\n\n`,
  );
  project.provide("mysqlUrl", null);
}

/** Undefined when the server answers, else why it did not. */
async function probe(url: string): Promise<string | undefined> {
  try {
    const connection = await createConnection(mysqlConnectionOptions(url));
    try {
      await connection.query("SELECT 1");
    } finally {
      await connection.end();
    }
    return undefined;
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: unknown };
    return typeof code === "string" ? code : String(message);
  }
}

function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== "") parsed.password = "***";
  return parsed.toString();
}
