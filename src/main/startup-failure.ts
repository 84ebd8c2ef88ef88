/**
 * Why the service could not start, as one line for its operator (issue 48, item 3): what failed, where, and
 * what to check, never a stack trace. The port taken, the database unreachable or refusing the credentials,
 * DATA_DIR unusable (also under a sign-in setup error: the development issuer's key file is there); a
 * configuration or other sign-in setup error (an identity provider that cannot be reached) is its own
 * message. Anything else: the message of its innermost cause.
 */
import { AuthSetupError } from "../auth/auth-errors.js";
import { type Config, ConfigError, describeStorage } from "../config.js";

type Coded = Error & { code?: unknown; address?: unknown; port?: unknown; path?: unknown; syscall?: unknown };

/** `error` and its causes, outermost first (at most a few: a cause chain may loop). */
function chain(error: unknown): Coded[] {
  const found: Coded[] = [];
  for (let at = error, i = 0; at instanceof Error && i < 8; at = at.cause, i++) found.push(at as Coded);
  return found;
}

const codeOf = (error: Coded): string => (typeof error.code === "string" ? error.code : "");

/** Network errors of a connection that never opened. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH"]);
/** The database server's refusals of the credentials (MySQL's and MariaDB's codes) or of the database named. */
const REFUSED = /^(ER_ACCESS_DENIED|ER_DBACCESS_DENIED|ER_BAD_DB_ERROR)/;
/** A file or directory the process cannot use. */
const FILE = new Set(["ENOTDIR", "EACCES", "EPERM", "EROFS", "ENOENT", "EISDIR", "ENOSPC"]);

/** The one line that says why the start failed, given `config` when it was read. */
export function startupFailureLine(error: unknown, config: Config | undefined): string {
  if (error instanceof ConfigError) return error.message;
  const errors = chain(error);
  const listen = errors.find((e) => e.syscall === "listen" || codeOf(e) === "EADDRINUSE");
  if (listen !== undefined && codeOf(listen) === "EADDRINUSE")
    return (
      `cannot listen on ${String(listen.address ?? config?.host)}:${String(listen.port ?? config?.port)}: ` +
      `the port is in use (EADDRINUSE); stop what listens there, or set PORT (and HOST) to another`
    );
  const database = config?.databaseUrl === undefined ? undefined : describeStorage(config);
  const unreachable = errors.find((e) => UNREACHABLE.has(codeOf(e)));
  if (database !== undefined && unreachable !== undefined)
    return (
      `the database cannot be reached (${codeOf(unreachable)}): ${database}; check that MariaDB or MySQL runs ` +
      `there and accepts connections, and DATABASE_URL's host and port`
    );
  const refused = errors.find((e) => REFUSED.test(codeOf(e)));
  if (database !== undefined && refused !== undefined)
    return (
      `the database refused the connection (${codeOf(refused)}): ${database}: ${refused.message}; check ` +
      `DATABASE_URL's user, password and database name`
    );
  const file = errors.find((e) => FILE.has(codeOf(e)) && typeof e.path === "string");
  if (file !== undefined)
    return (
      `DATA_DIR ${config?.dataDir ?? ""} cannot be used (${codeOf(file)} on ${String(file.path)}): it must be ` +
      `a directory this process can read and write`
    );
  if (error instanceof AuthSetupError) return error.message;
  const last = errors.at(-1);
  return last === undefined ? String(error) : `the service could not start: ${last.message}`;
}
