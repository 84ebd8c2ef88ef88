import {
  createServer as createHttpServer,
  type Server as HttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import {
  createServer as createHttp2Server,
  type Http2Server,
  type Http2Session,
  constants as http2Constants,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { App } from "../app.js";
import { bodyDeadline } from "./body-deadline.js";
import { coalesceWrites, markListening, quietOnPeerGoaway, replayingSocket, underDeno } from "./deno-socket.js";
import { createEarlyWatchGate, type EarlyWatchGate } from "./early-watch-refusal.js";
import { answerParserRefusals } from "./http1-refusals.js";
import { createNodeEdge, type NodeEdge } from "./node-edge.js";

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

/** What the servers of one port share: the connections open, the sessions, and whether it drains. */
interface PortState {
  draining: boolean;
  /** Every accepted socket. */
  readonly sockets: Set<Socket>;
  /** Each open HTTP/2 session, with what closes it gracefully (GOAWAY, then the streams in flight finish). */
  readonly sessions: Map<Http2Session, () => void>;
  /** The HTTP/1.1 connections and their requests in progress (a socket is busy from its first bytes). */
  readonly h1Busy: Map<Duplex, { requests: number; awaitingFirst: boolean }>;
}

/**
 * Every surface on one port. Node's cleartext HTTP/2 server cannot also speak
 * HTTP/1.1 (`allowHTTP1` is TLS-only), so a TCP server peeks at the first
 * bytes of each connection and hands it to an HTTP/2 server (gRPC, and any
 * prior-knowledge HTTP/2 client) or to an HTTP/1.1 server (REST, Connect,
 * gRPC-Web). Both hand every request to the same edge (node-edge.ts).
 */
export function createNodeServer(app: App): NodeServer {
  // A plain REST watch request waits for its key's turn, or is refused, before its HTTP/1.1 server reads it.
  const gate = createEarlyWatchGate({
    limits: app.watches,
    logger: app.logger,
    isWatchPath: app.isWatchPath,
    maxWaitMs: app.config.http.headersTimeoutMs,
  });
  // Every request, HTTP/1.1 or HTTP/2, goes through the one edge.
  const edge = createNodeEdge(app, gate.answered);
  const state: PortState = { draining: false, sockets: new Set(), sessions: new Map(), h1Busy: new Map() };
  const h1 = createH1Server(app, edge, state);
  const h2 = createH2Server(app, edge, state);
  const server = createNetServer(peekingRoute(app, state, { h1, h2, gate }));
  return {
    server,
    close: (deadlineMs = app.config.shutdownTimeoutMs) =>
      new Promise((resolve) => {
        state.draining = true;
        let timer: NodeJS.Timeout | undefined;
        // Called back once every accepted connection has closed.
        server.close(() => {
          clearTimeout(timer);
          resolve({ cut: 0 });
        });
        edge.drain();
        for (const close of state.sessions.values()) close();
        // Kept-alive connections between requests close now, as Node's own server.close() does.
        // Connections whose first bytes have not arrived yet stay: they will be refused when they speak.
        for (const [socket, busy] of state.h1Busy) if (busy.requests === 0) socket.destroy();
        timer = setTimeout(() => {
          const cut = state.sockets.size;
          for (const session of state.sessions.keys()) session.destroy();
          for (const socket of state.sockets) socket.destroy();
          resolve({ cut });
        }, deadlineMs);
      }),
  };
}

/** The HTTP/1.1 server, handed connections by the peek (it never listens itself). */
function createH1Server(app: App, edge: NodeEdge, state: PortState): HttpServer {
  // Slow clients (slowloris, a body that never ends) get 408 and the connection closed. Node checks
  // the timeouts every connectionsCheckingInterval, so it is a fraction of the shortest one.
  const { headersTimeoutMs, requestTimeoutMs, bodyTimeoutMs } = app.config.http;
  const h1 = createHttpServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(headersTimeoutMs / 4))),
    },
    edge.handle,
  );
  // What the parser refuses before a request exists is answered in the contract's error shape, and logged.
  h1.on("clientError", answerParserRefusals(app.logger));
  // Node starts checking those timeouts when its server emits "listening"; this one never listens
  // (it is handed connections), so start the checks by hand.
  h1.emit("listening");
  if (underDeno) markListening(h1);
  // What close() needs to drain: which HTTP/1.1 connections are between requests.
  h1.on("request", (req: IncomingMessage, res: ServerResponse) => {
    bodyDeadline(req, res, bodyTimeoutMs);
    const busy = state.h1Busy.get(req.socket);
    if (busy === undefined) return;
    if (busy.awaitingFirst) busy.awaitingFirst = false;
    else busy.requests++;
    res.once("close", () => busy.requests--);
  });
  return h1;
}

/** The HTTP/2 server, handed connections by the peek. */
function createH2Server(app: App, edge: NodeEdge, state: PortState): Http2Server {
  const { bodyTimeoutMs, http2IdleTimeoutMs } = app.config.http;
  // Node's default lets one connection open 2^32-1 streams at once, each holding a request
  // (and its body) in memory: bounded here, announced to the client in SETTINGS.
  const h2 = createHttp2Server(
    { settings: { maxConcurrentStreams: app.config.http.http2MaxConcurrentStreams } },
    edge.handle,
  );
  serveLeanStreams(h2, edge);
  h2.on("session", (session) => {
    state.sessions.set(session, underDeno ? quietOnPeerGoaway(session) : () => session.close());
    session.once("close", () => state.sessions.delete(session));
    session.setTimeout(http2IdleTimeoutMs, () => session.destroy());
    // A connection accepted before the drain but speaking only now: GOAWAY before any stream.
    if (state.draining) state.sessions.get(session)?.();
  });
  // HTTP/2 has no request timeout of its own: a stream whose request body has not ended within the body
  // deadline of its headers is cancelled. A body that ended but was never read (a GET answered by REST) is done.
  h2.on("stream", (stream) => {
    if (stream.endAfterHeaders) return; // no body
    const timer = setTimeout(() => {
      if (stream.state?.remoteClose !== 1) stream.close(http2Constants.NGHTTP2_CANCEL);
    }, bodyTimeoutMs);
    const clear = (): void => clearTimeout(timer);
    stream.once("end", clear);
    stream.once("close", clear);
  });
  return h2;
}

/**
 * The TCP server's connection listener: reads the first bytes and hands the socket to HTTP/2 or HTTP/1.1 (through
 * the early watch gate).
 */
function peekingRoute(
  app: App,
  state: PortState,
  { h1, h2, gate }: { h1: HttpServer; h2: Http2Server; gate: EarlyWatchGate },
): (socket: Socket) => void {
  const { maxConnections } = app.config;
  const { headersTimeoutMs } = app.config.http;
  return (socket) => {
    socket.on("error", () => socket.destroy());
    // Past MAX_CONNECTIONS a new connection is closed at once, before anything of it is read.
    if (state.sockets.size >= maxConnections) {
      app.metrics.connectionRefused();
      socket.destroy();
      return;
    }
    state.sockets.add(socket);
    socket.once("close", () => state.sockets.delete(socket));
    let seen: Buffer = Buffer.alloc(0);
    // A connection that has not said which protocol it speaks within HTTP_HEADERS_TIMEOUT_MS of its accept is
    // closed, like a request whose headers never end: one deadline, not an idle timeout a byte at a time restarts.
    const peekDeadline = setTimeout(() => socket.destroy(), headersTimeoutMs);
    socket.once("close", () => clearTimeout(peekDeadline));
    const onData = (chunk: Buffer): void => {
      // The first chunk as it is (it may be 64 KiB of a body, on every connection at once): copied only to
      // join a second.
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const isH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && seen.length < H2_PREFACE.length) return; // not enough bytes to tell yet
      socket.off("data", onData);
      clearTimeout(peekDeadline);
      if (isH2) {
        handToH2(socket, seen, h2);
        return;
      }
      const serve = (answered?: () => void): void =>
        handToH1(socket, seen, h1, state, answered === undefined ? undefined : (c) => gate.track(c, answered));
      // A plain watch request: served in its key's turn, or refused from these bytes (early-watch-refusal.ts).
      if (state.draining) serve();
      else gate.admit(seen, socket, serve);
    };
    socket.on("data", onData);
  };
}

/** Hands a connection that began with the HTTP/2 preface (`seen`) to the HTTP/2 server. */
function handToH2(socket: Socket, seen: Buffer, h2: Http2Server): void {
  // Without TCP_NODELAY, Nagle's algorithm held small gRPC frames ~40 ms (BENCHMARKS.md:
  // gRPC GET p50 57 -> 8 ms). Sockets handed over by the peeking server never get it set.
  socket.setNoDelay(true);
  // The session reads the socket's native handle itself, and takes the bytes already read
  // (the preface) from its buffer first (nodejs/node#35475): no JavaScript stream in between.
  socket.pause();
  socket.unshift(seen);
  // Deno's session writes frame by frame: a turn's writes go out as one (deno-socket.ts).
  if (underDeno) coalesceWrites(socket);
  h2.emit("connection", socket);
}

/**
 * Hands a connection that began with anything else (`seen`) to the HTTP/1.1 server; `handing` is first told what it
 * is given.
 */
function handToH1(
  socket: Socket,
  seen: Buffer,
  h1: HttpServer,
  state: PortState,
  handing?: (connection: Duplex) => void,
): void {
  if (underDeno) {
    // Deno's HTTP/1.1 server garbles a socket handed over as below: it gets a copy (deno-socket.ts),
    // on which Deno's server leaves Nagle's algorithm on, where Node's turns it off (40 ms per answer).
    socket.setNoDelay(true);
    coalesceWrites(socket);
    const connection = replayingSocket(socket, seen);
    state.h1Busy.set(connection, { requests: 1, awaitingFirst: true });
    socket.once("close", () => state.h1Busy.delete(connection));
    handing?.(connection);
    h1.emit("connection", connection);
    return;
  }
  socket.pause();
  socket.unshift(seen);
  state.h1Busy.set(socket, { requests: 1, awaitingFirst: true });
  socket.once("close", () => state.h1Busy.delete(socket));
  handing?.(socket);
  h1.emit("connection", socket);
  socket.resume();
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

/**
 * Binary gRPC calls of the registry's RPCs are served from their HTTP/2 stream (NodeEdge.handleStream): Node's
 * compatibility request and response cost what the rest of such a call costs, a tenth of it (BENCHMARKS.md,
 * "Issue 19"). Every other stream goes on to them as before: the server's own "stream" listener (the one that
 * makes them, added with the request listener) is called for it. Where the server has no such single listener
 * (another runtime's node:http2), nothing changes.
 */
function serveLeanStreams(h2: Http2Server, edge: NodeEdge): void {
  const listeners = h2.listeners("stream");
  const compat = listeners[0] as ((...args: unknown[]) => void) | undefined;
  if (listeners.length !== 1 || compat === undefined) return;
  h2.removeListener("stream", compat);
  h2.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) => {
    // The listener's arguments after the headers: the flags, then the headers as received (name, value, ...).
    const raw = Array.isArray(rest[1]) ? (rest[1] as string[]) : undefined;
    if (!edge.handleStream(stream, headers, raw)) compat.call(h2, stream, headers, ...rest);
  });
}
