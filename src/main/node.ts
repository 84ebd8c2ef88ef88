// The Node entrypoint: config -> app -> one port for every surface.
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { createApp } from "../app.js";
import { AuthSetupError } from "../auth/auth-errors.js";
import { ConfigError, describeStorage, parseConfig } from "../config.js";
import { installGracefulShutdown } from "./graceful-shutdown.js";
import { localIssuerKeyFile } from "./local-issuer-key-file.js";
import { createNodeServer, listen } from "./node-server.js";

async function main(): Promise<void> {
  const config = parseConfig(process.env);
  const app = await createApp(config, { keyStore: localIssuerKeyFile(config.dataDir), acceptCompression: [compressionGzip, compressionBrotli] });
  const node = createNodeServer(app);
  const port = await listen(node.server, config.port, config.host);
  app.logger.info("agent definition registry listening", {
    url: `http://${config.host}:${port}`,
    surfaces: "gRPC (HTTP/2), gRPC-Web, Connect, REST",
    storage: describeStorage(config),
    defaultTenant: config.defaultTenant,
    auth: app.authenticator.description,
  });
  installGracefulShutdown(node, app);
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError || err instanceof AuthSetupError ? err.message : err);
  process.exit(1);
});
