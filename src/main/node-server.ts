import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { constants as http2Constants, createServer as createHttp2Server, type Http2Session } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { expressConnectMiddleware } from "@connectrpc/connect-express";
import express from "express";
import type { App } from "../app.js";
import { type NodeHandlerArgs, sendFetchResponse, toFetchRequest } from "./node-fetch-bridge.js";
import { createNodeRequestEdge } from "./node-request-edge.js";

/** The HTTP/2 connection preface: a connection that starts with it speaks HTTP/2 (gRPC). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export interface NodeServer {
  readonly server: Server;
  /**
   * Drains and closes: stops accepting connections; refuses new requests on
   * open ones (HTTP/1.1: 503 with `Connection: close`; HTTP/2: GOAWAY); lets
   * requests in flight finish; resolves once every connection has closed, or
   * when `deadlineMs` (default `SHUTDOWN_TIMEOUT_MS`) has passed, after
   * cutting the connections still open (`cut` counts them).
   */
  close(deadlineMs?: number): Promise<{ cut: number }>;
}

/**
 * Every surface on one port. Node's cleartext HTTP/2 server cannot also speak
 * HTTP/1.1 (`allowHTTP1` is TLS-only), so a TCP server peeks at the first
 * bytes of each connection and hands it to an HTTP/2 server (gRPC, and any
 * prior-knowledge HTTP/2 client) or to an HTTP/1.1 server (REST, Connect,
 * gRPC-Web). Both run the same Connect routes and the same REST handler.
 */
export function createNodeServer(app: App): NodeServer {
  // Every request gets its record (log line, metrics, request id) here, whichever surface serves it.
  const edge = createNodeRequestEdge(app);
  const options = { routes: app.routes, readMaxBytes: app.config.maxBodyBytes, contextValues: edge.contextValues };

  const plainHttp = async (...[req, res]: NodeHandlerArgs): Promise<void> => {
    try {
      await sendFetchResponse(req, res, await app.handleHttp(toFetchRequest(req, res), edge.contextValues(req)));
    } catch (err) {
      app.logger.error("request failed outside the handlers", { err });
      if (!res.headersSent) (res as ServerResponse).writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "An internal error occurred; it has been logged.", code: "INTERNAL" }));
    }
  };

  const h1App = express();
  h1App.disable("x-powered-by");
  h1App.use((req, res, next) => void (edge.begin(req, res) && next()));
  h1App.use(expressConnectMiddleware(options));
  h1App.use((req, res) => void plainHttp(req, res));
  // Slow clients (slowloris, a body that never ends) get 408 and the connection closed. Node checks
  // the timeouts every connectionsCheckingInterval, so it is a fraction of the shortest one.
  const { headersTimeoutMs, requestTimeoutMs, http2IdleTimeoutMs } = app.config.http;
  const h1 = createHttpServer(
    { headersTimeout: headersTimeoutMs, requestTimeout: requestTimeoutMs, connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(headersTimeoutMs / 4))) },
    h1App,
  );
  // Node starts checking those timeouts when its server emits "listening"; this one never listens
  // (it is handed connections), so start the checks by hand.
  h1.emit("listening");

  const h2Handler = connectNodeAdapter({ ...options, fallback: (req, res) => void plainHttp(req, res) });
  const h2 = createHttp2Server((req, res) => void (edge.begin(req, res) && h2Handler(req, res)));
  const sessions = new Set<Http2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    session.setTimeout(http2IdleTimeoutMs, () => session.destroy());
    // A connection accepted before the drain but speaking only now: GOAWAY before any stream.
    if (draining) session.close();
  });

  // HTTP/2 has no request timeout of its own: a stream whose request body has not ended in time is cancelled.
  h2.on("stream", (stream) => {
    const timer = setTimeout(() => stream.close(http2Constants.NGHTTP2_CANCEL), requestTimeoutMs);
    const clear = (): void => clearTimeout(timer);
    stream.once("end", clear);
    stream.once("close", clear);
  });

  // What close() needs to drain: every accepted socket, and which HTTP/1.1 ones are between requests.
  let draining = false;
  const sockets = new Set<Socket>();
  // A socket is handed to HTTP/1.1 with its first request's bytes in hand, so it counts as busy from then.
  const h1Busy = new Map<Socket, { requests: number; awaitingFirst: boolean }>();
  h1.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const busy = h1Busy.get(req.socket as Socket);
    if (busy === undefined) return;
    if (busy.awaitingFirst) busy.awaitingFirst = false;
    else busy.requests++;
    res.once("close", () => busy.requests--);
  });

  const route = (socket: Socket): void => {
    let seen = Buffer.alloc(0);
    // A connection that never says which protocol it speaks is closed like a request whose headers never end.
    const onSilence = (): void => void socket.destroy();
    socket.setTimeout(headersTimeoutMs, onSilence);
    const onData = (chunk: Buffer): void => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const isH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && seen.length < H2_PREFACE.length) return; // not enough bytes to tell yet
      socket.off("data", onData);
      socket.setTimeout(0);
      socket.off("timeout", onSilence);
      if (isH2) {
        // Without TCP_NODELAY, Nagle's algorithm held small gRPC frames ~40 ms (BENCHMARKS.md:
        // gRPC GET p50 57 -> 8 ms). Sockets handed over by the peeking server never get it set.
        socket.setNoDelay(true);
        h2.emit("connection", replaying(socket, seen));
      } else {
        socket.pause();
        socket.unshift(seen);
        h1Busy.set(socket, { requests: 1, awaitingFirst: true });
        socket.once("close", () => h1Busy.delete(socket));
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const server = createNetServer(route);

  return {
    server,
    close: (deadlineMs = app.config.shutdownTimeoutMs) =>
      new Promise((resolve) => {
        draining = true;
        let timer: NodeJS.Timeout | undefined;
        // Called back once every accepted connection has closed.
        server.close(() => {
          clearTimeout(timer);
          resolve({ cut: 0 });
        });
        edge.drain();
        for (const session of sessions) session.close();
        // Kept-alive connections between requests close now, as Node's own server.close() does.
        // Connections whose first bytes have not arrived yet stay: they will be refused when they speak.
        for (const [socket, busy] of h1Busy) if (busy.requests === 0) socket.destroy();
        timer = setTimeout(() => {
          const cut = sockets.size;
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
          resolve({ cut });
        }, deadlineMs);
      }),
  };
}

/**
 * The socket as a stream that first replays the bytes already read from it.
 * Node's HTTP/2 session reads a net.Socket's native handle directly, so bytes
 * put back with `unshift` would be lost to it; a plain Duplex is read as a
 * stream instead.
 */
function replaying(socket: Socket, head: Buffer): Duplex {
  const stream = new Duplex({
    read: () => void socket.resume(),
    write: (chunk, _encoding, done) => void socket.write(chunk, done),
    final: (done) => void socket.end(done),
    destroy: (err, done) => {
      socket.destroy(err ?? undefined);
      done(err);
    },
  });
  stream.push(head);
  socket.on("data", (chunk) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.once("end", () => stream.push(null));
  socket.once("close", () => stream.destroy());
  return stream;
}

/** Listens on `port` (0: any free port) and resolves with the port bound. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      const address = server.address();
      resolve(typeof address === "object" && address !== null ? address.port : port);
    });
  });
}
