// The Deno entrypoint: config -> app -> Deno.serve (the fetch edge), one port for Connect,
// gRPC-Web and REST. Native gRPC needs HTTP trailers, which fetch and
// Deno.serve do not offer: it is served by the Node entrypoint only.
import { createApp } from "../app.js";
import { AuthSetupError } from "../auth/auth-errors.js";
import { type Config, ConfigError, describeStorage, parseConfig } from "../config.js";
import { asRegistryError } from "../domain/errors.js";
import { fetchEdge } from "../edge/fetch-edge.js";
import { errorAnswer } from "../edge/http-answer.js";
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
  const handler = fetchEdge(app.edge, app.requests);
  const server = deno.serve(
    {
      port: config.port,
      hostname: config.host,
      onListen: () => {}, // the start-up line below replaces Deno's own
      onError: (err) => {
        app.logger.error("request failed outside the handlers", { err });
        const { status, headers, body } = errorAnswer(asRegistryError(err));
        return new Response(body as BodyInit | null, { status, headers });
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
