import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { createServer as createHttp2Server, type Http2Session } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { expressConnectMiddleware } from "@connectrpc/connect-express";
import express from "express";
import type { App } from "../app.js";
import { type NodeHandlerArgs, sendFetchResponse, toFetchRequest } from "./node-fetch-bridge.js";

/** The HTTP/2 connection preface: a connection that starts with it speaks HTTP/2 (gRPC). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export interface NodeServer {
  readonly server: Server;
  /** Stops accepting, ends open HTTP/1.1 and HTTP/2 connections, and resolves when closed. */
  close(): Promise<void>;
}

/**
 * Every surface on one port. Node's cleartext HTTP/2 server cannot also speak
 * HTTP/1.1 (`allowHTTP1` is TLS-only), so a TCP server peeks at the first
 * bytes of each connection and hands it to an HTTP/2 server (gRPC, and any
 * prior-knowledge HTTP/2 client) or to an HTTP/1.1 server (REST, Connect,
 * gRPC-Web). Both run the same Connect routes and the same REST handler.
 */
export function createNodeServer(app: App): NodeServer {
  const options = { routes: app.routes, readMaxBytes: app.config.maxBodyBytes };

  const plainHttp = async (...[req, res]: NodeHandlerArgs): Promise<void> => {
    try {
      await sendFetchResponse(req, res, await app.handleHttp(toFetchRequest(req, res)));
    } catch (err) {
      app.logger.error("request failed outside the handlers", { err });
      if (!res.headersSent) (res as ServerResponse).writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "An internal error occurred; it has been logged.", code: "INTERNAL" }));
    }
  };

  const h1App = express();
  h1App.disable("x-powered-by");
  h1App.use(expressConnectMiddleware(options));
  h1App.use((req, res) => void plainHttp(req, res));
  const h1 = createHttpServer(h1App);

  const h2 = createHttp2Server(connectNodeAdapter({ ...options, fallback: (req, res) => void plainHttp(req, res) }));
  const sessions = new Set<Http2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });

  const route = (socket: Socket): void => {
    let seen = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      seen = Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const isH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && seen.length < H2_PREFACE.length) return; // not enough bytes to tell yet
      socket.off("data", onData);
      if (isH2) {
        h2.emit("connection", replaying(socket, seen));
      } else {
        socket.pause();
        socket.unshift(seen);
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  };
  const server = createNetServer(route);

  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.close();
        h1.closeIdleConnections();
        setTimeout(() => {
          for (const session of sessions) session.destroy();
          h1.closeAllConnections();
        }, 5000).unref();
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
