/**
 * Connection settings for the MySQL/MariaDB server the tests use.
 */
import type { ConnectionOptions } from "mysql2/promise";

/** The server the MySQL suite runs against unless TEST_MYSQL_URL says otherwise. */
export const defaultTestMysqlUrl = "mysql://root@127.0.0.1:3306";

/**
 * TEST_MYSQL_URL=off: a run without the MariaDB half of the suite, asked for (`npm run test:quick`): no server is
 * probed, and the fault tests start no MariaDB of their own.
 */
export function mysqlSuiteOff(): boolean {
  return process.env.TEST_MYSQL_URL === "off";
}

/** mysql2 options for a `mysql://user:password@host:port[/database]` URL. */
export function mysqlConnectionOptions(url: string, database?: string): ConnectionOptions {
  const parsed = new URL(url);
  const path = decodeURIComponent(parsed.pathname.replace(/^\//, ""));
  const name = database ?? path;
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: parsed.port === "" ? 3306 : Number(parsed.port),
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    ...(name === "" ? {} : { database: name }),
    connectTimeout: 3_000,
  };
}

/** The same server URL naming another database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}
