/**
 * The registry inside an existing express 5 app (`agent-definition-registry/express`):
 *
 *   const registry = await createRegistryMiddleware(parseConfig(process.env));
 *   app.use(registry);           // REST, Connect and gRPC-Web of the registry, at their spec paths
 *   app.get("/other", ...);      // every path the registry does not serve reaches the app's other routes
 *   ...
 *   await registry.close();      // drains the registry's requests, then releases its database pool
 *
 * Each request the registry serves goes through the same Node adapter (node-edge.ts) and the same edge as on the
 * registry's own server: authentication once, admission and the message check before any body is read, the body
 * budget, the access log and metrics, every error in the spec's shape. It is not connect-express's
 * `expressConnectMiddleware`: that one builds a Connect router of its own and calls its handlers with a request it
 * made itself, with only a synchronous `contextValues(req)` in between, where the edge's verdict (an asynchronous
 * token check, then a message check that hands the handler the checked body) cannot be made (docs/decisions.md).
 *
 * What it cannot serve: gRPC (HTTP/2; express serves HTTP/1.1), and what belongs to the server that accepts the
 * connections (MAX_CONNECTIONS, header and request timeouts, HTTP/2 settings, the parser's refusals): the host's
 * server has its own.
 */
import type { ServerResponse } from "node:http";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { NextFunction, Request, Response } from "express";
import { type App, type AppDeps, createApp } from "../app.js";
import { developmentIssuerWarning } from "../auth/local-issuer.js";
import type { Config } from "../config.js";
import { bodyAlreadyRead } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import { writeAnswer } from "../node/answer.js";
import { bodyDeadline } from "../node/body-deadline.js";
import { createNodeEdge } from "../node/node-edge.js";
import { callerError } from "../surfaces/pipeline/failures.js";
import { cardSigningKeyFiles } from "./card-signing-key-files.js";
import { readCatalogFiles } from "./catalog-files.js";
import { localIssuerKeyFile } from "./local-issuer-key-file.js";

export type { App, AppDeps } from "../app.js";
export { type Config, ConfigError, parseConfig } from "../config.js";

/** An express middleware serving the registry's paths; every other path goes to `next()`. */
export interface RegistryMiddleware {
  (req: Request, res: Response, next: NextFunction): void;
  /** The registry it serves (its config, logger, metrics endpoint, operations). */
  readonly app: App;
  /**
   * Drains: the registry's requests from now on are refused (503, the spec's `UNAVAILABLE` shape, their
   * connection closed after the answer); those in flight are waited for, up to SHUTDOWN_TIMEOUT_MS; then the
   * registry's database pool is released, when the middleware made the registry from a Config (an App passed
   * in is its caller's to close). The host's other routes and its server are left alone.
   */
  close(): Promise<void>;
}

/**
 * The middleware of a registry made from `config` (as the registry's own entrypoint makes it: the local
 * development issuer's key in DATA_DIR, gzip and brotli for the RPCs), or of an `App` made by its caller.
 * `deps` is passed to createApp (a logger of the host's, a wrapped authenticator).
 */
export async function createRegistryMiddleware(source: Config | App, deps: AppDeps = {}): Promise<RegistryMiddleware> {
  const owned = !("edge" in source);
  const catalogFiles = owned ? await readCatalogFiles() : undefined;
  const app = owned
    ? await createApp(source, {
        keyStore: localIssuerKeyFile(source.dataDir),
        cardKeys: cardSigningKeyFiles(source),
        ...(catalogFiles === undefined ? {} : { catalogFiles }),
        acceptCompression: [compressionGzip, compressionBrotli],
        ...deps,
      })
    : source;
  if (owned && app.config.auth.issuer === undefined)
    app.logger.warn(...developmentIssuerWarning(app.config, app.authenticator.description));
  return registryMiddleware(app, owned);
}

function registryMiddleware(app: App, owned: boolean): RegistryMiddleware {
  const edge = createNodeEdge(app);
  const { bodyTimeoutMs } = app.config.http;
  /** The registry's requests not yet closed, and who waits for there to be none. */
  let inFlight = 0;
  let idle: (() => void) | undefined;
  let closing: Promise<void> | undefined;

  const middleware = (req: Request, res: Response, next: NextFunction): void => {
    // req.url is the path below the mount point (express strips `app.use(path, ...)`'s path).
    const pathname = req.url.split("?", 1)[0] ?? "/";
    if (!app.serves(pathname)) return void next();
    // A body parser mounted before the registry has read the body: the registry cannot check what it cannot
    // read, and what the parser kept is not the body (docs/decisions.md, "Issue 50: the small ones"). Said to
    // the caller and, as an error, to the operator's log.
    if (req.readableDidRead || req.readableEnded) {
      const err = bodyAlreadyRead(`${req.method} ${req.originalUrl.split("?", 1)[0]}`);
      return void writeAnswer(res, errorAnswer(callerError(err, app.logger, pathname)));
    }
    if (req.baseUrl !== "") prefixLocation(res, req.baseUrl);
    bodyDeadline(req, res, bodyTimeoutMs);
    inFlight++;
    res.once("close", () => {
      inFlight--;
      if (inFlight === 0) idle?.();
    });
    edge.handle(req, res);
  };

  const close = async (): Promise<void> => {
    edge.drain();
    if (inFlight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, app.config.shutdownTimeoutMs);
        idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    if (owned) await app.close();
  };

  return Object.assign(middleware, {
    app,
    close: () => {
      closing ??= close();
      return closing;
    },
  });
}

/**
 * Mounted under a path (`app.use("/registry", registry)`), the registry sees the paths below it; the Location it
 * answers a REST create with (a path it builds from the request's) gets the mount path back in front, so that it
 * names the new instance where the client can reach it.
 */
function prefixLocation(res: ServerResponse, mountPath: string): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const headers = args.at(-1);
    if (typeof headers === "object" && headers !== null && !Array.isArray(headers)) {
      const location = (headers as Record<string, unknown>).location;
      if (typeof location === "string" && location.startsWith("/"))
        args[args.length - 1] = { ...headers, location: `${mountPath}${location}` };
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof res.writeHead;
}
