// The Deno entrypoint: config -> app -> Deno.serve, one port for Connect,
// gRPC-Web and REST. Native gRPC needs HTTP trailers, which fetch and
// Deno.serve do not offer: it is served by the Node entrypoint only.
import { createApp } from "../app.js";
import { AuthSetupError } from "../auth/auth-errors.js";
import { type Config, ConfigError, describeStorage, parseConfig } from "../config.js";
import { connectFetchAdapter } from "../transport/connect-fetch-adapter.js";
import { denoKeyFile } from "./deno-key-file.js";
import { denoRuntime } from "./deno-runtime.js";

/**
 * Why the embedded database is not offered here: better-sqlite3 is a
 * V8/nan native addon, and Deno loads only Node-API addons.
 */
const EMBEDDED_DATABASE_UNAVAILABLE =
  "DATABASE_URL is required under Deno: the embedded SQLite database uses better-sqlite3, a native addon built on V8's own API (nan), and Deno loads only Node-API addons. Set DATABASE_URL=mysql://user:password@host:3306/database, or run under Node (npm start) for the embedded database.";

async function main(): Promise<void> {
  const deno = denoRuntime();
  const config = parseDenoConfig(deno.env.toObject());
  const app = await createApp(config, { keyStore: denoKeyFile(deno, config.dataDir) });
  const handler = connectFetchAdapter({ routes: app.routes, readMaxBytes: config.maxBodyBytes, fallback: app.handleHttp });
  const server = deno.serve(
    {
      port: config.port,
      hostname: config.host,
      onListen: () => {}, // the start-up line below replaces Deno's own
      onError: (err) => {
        app.logger.error("request failed outside the handlers", { err });
        return Response.json({ error: "An internal error occurred; it has been logged.", code: "INTERNAL" }, { status: 500 });
      },
    },
    handler,
  );
  app.logger.info("agent definition registry listening", {
    url: `http://${config.host}:${server.addr.port}`,
    surfaces: "gRPC-Web, Connect, REST (Deno: no native gRPC)",
    storage: describeStorage(config),
    defaultTenant: config.defaultTenant,
    auth: app.authenticator.description,
  });
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    app.logger.info("shutting down", { signal });
    await server.shutdown();
    await app.close();
    deno.exit(0);
  };
  deno.addSignalListener("SIGTERM", () => void stop("SIGTERM"));
  deno.addSignalListener("SIGINT", () => void stop("SIGINT"));
}

/** parseConfig, plus the one setting Deno requires; every problem listed at once. */
function parseDenoConfig(env: Record<string, string>): Config {
  const denoProblems = env.DATABASE_URL ? [] : [EMBEDDED_DATABASE_UNAVAILABLE];
  let config: Config;
  try {
    config = parseConfig(env);
  } catch (error: unknown) {
    if (error instanceof ConfigError) throw new ConfigError([...error.problems, ...denoProblems]);
    throw error;
  }
  if (denoProblems.length > 0) throw new ConfigError(denoProblems);
  return config;
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError || err instanceof AuthSetupError ? err.message : err);
  denoRuntime().exit(1);
});
