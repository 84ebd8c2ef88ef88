// The entrypoint, under Node (`npm start`) and Deno (`npm run start:deno`) alike:
// config -> app -> one port for every surface.
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { createApp } from "../app.js";
import { developmentIssuerWarning } from "../auth/local-issuer.js";
import { type Config, describeStorage, parseConfig } from "../config.js";
import { createNodeMetricsServer } from "../node/node-metrics-server.js";
import { createNodeServer, listen } from "../node/node-server.js";
import { cardSigningKeyFiles } from "./card-signing-key-files.js";
import { catalogDir, readCatalogFiles } from "./catalog-files.js";
import { installGracefulShutdown } from "./graceful-shutdown.js";
import { growHeap } from "./heap-growth.js";
import { localIssuerKeyFile } from "./local-issuer-key-file.js";
import { startupFailureLine } from "./startup-failure.js";

/** The configuration, once read: the failure message of a start names what it says. */
let config: Config | undefined;

async function main(): Promise<void> {
  config = parseConfig(process.env);
  // The process is the service's own (not an app it is mounted in): its V8 heap's growth is ours to set.
  const heapGrowingPercent = growHeap(config.databaseUrl);
  const catalogFiles = await readCatalogFiles();
  const app = await createApp(config, {
    keyStore: localIssuerKeyFile(config.dataDir),
    cardKeys: cardSigningKeyFiles(config),
    acceptCompression: [compressionGzip, compressionBrotli],
    ...(catalogFiles === undefined ? {} : { catalogFiles }),
  });
  const node = createNodeServer(app);
  const port = await listen(node.server, config.port, config.host);
  const metricsServer =
    config.metricsPort === undefined
      ? undefined
      : createNodeMetricsServer(app.metricsEndpoint, config.http, app.logger);
  const metricsPort =
    metricsServer === undefined ? undefined : await listen(metricsServer, config.metricsPort ?? 0, config.host);
  if (config.auth.issuer === undefined)
    app.logger.warn(...developmentIssuerWarning(config, app.authenticator.description));
  if (catalogFiles === undefined)
    app.logger.warn("the catalog is not built: /ui/ answers 404 until npm run build has built it", {
      dir: catalogDir(),
    });
  app.logger.info("agent definition registry listening", {
    url: `http://${config.host}:${port}`,
    surfaces: "gRPC (HTTP/2), gRPC-Web, Connect, REST",
    catalog: `http://${config.host}:${port}/ui/`,
    metrics:
      metricsPort === undefined
        ? `http://${config.host}:${port}/metrics`
        : `http://${config.host}:${metricsPort}/metrics`,
    storage: describeStorage(config),
    ...(heapGrowingPercent === undefined ? {} : { heapGrowingPercent }),
    defaultTenant: config.defaultTenant,
    auth: app.authenticator.description,
  });
  installGracefulShutdown(node, app, metricsServer === undefined ? [] : [metricsServer]);
}

main().catch((err: unknown) => {
  console.error(startupFailureLine(err, config));
  process.exit(1);
});
