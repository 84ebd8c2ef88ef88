import type { Server } from "node:net";
import type { App } from "../app.js";
import type { NodeServer } from "../node/node-server.js";

/**
 * How long closing the database pool may take once the server has drained.
 * The pool waits for connections still lent out, which only requests cut at
 * the deadline can hold; a statement waits at most for its lock timeout.
 */
const POOL_CLOSE_LIMIT_MS = 5_000;

/**
 * The same signal again within this time of the first is the same stop, delivered twice (a launcher passing on
 * what the process group got already arrives within milliseconds); a person insisting takes longer.
 */
const SAME_SIGNAL_MS = 1_000;

/**
 * On SIGTERM or SIGINT: drain the server (no new connections, requests in
 * flight finish within `SHUTDOWN_TIMEOUT_MS`), close the database pool, and
 * exit 0. A second signal during the drain exits at once with 1 (an operator
 * who insists), unless it is the same signal within SAME_SIGNAL_MS of the
 * first: one stop delivered twice (Ctrl-C reaches the whole process group,
 * and npm or the Deno launcher passes it on again; so does a kill of the
 * group). `others` (the metrics port) stop at once: they hold no request
 * worth waiting for.
 */
export function installGracefulShutdown(node: NodeServer, app: App, others: readonly Server[] = []): void {
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  const stop = async (signal: NodeJS.Signals): Promise<void> => {
    if (first !== undefined) {
      if (signal === first.signal && performance.now() - first.at < SAME_SIGNAL_MS) return;
      app.logger.warn("second signal during shutdown: exiting without waiting", { signal });
      process.exit(1);
    }
    const started = performance.now();
    first = { signal, at: started };
    // close() stops accepting before it returns, so the line below is true when a reader sees it.
    const drained = node.close(app.config.shutdownTimeoutMs);
    // Watches never end by themselves: ended now, their streams close cleanly (gRPC OK, the SSE body ends)
    // and the drain does not wait for its deadline on them.
    await app.changes.close();
    for (const server of others) {
      server.close();
      (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
    }
    app.logger.info("shutting down", { signal, timeoutMs: app.config.shutdownTimeoutMs });
    const { cut } = await drained;
    if (cut > 0) app.logger.warn("shutdown deadline passed: cut the connections still open", { connections: cut });
    const closed = await Promise.race([app.close().then(() => true), delay(POOL_CLOSE_LIMIT_MS).then(() => false)]);
    if (!closed) app.logger.warn("the database pool did not close in time", { limitMs: POOL_CLOSE_LIMIT_MS });
    app.logger.info("shut down", { signal, durationMs: Math.round(performance.now() - started) });
    process.exit(0);
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => void stop(signal));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
