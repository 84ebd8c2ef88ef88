/**
 * What the one-port hand-off (node-server.ts) does differently under Deno,
 * whose `node:http` server mishandles the connections it is handed (Deno 2.9;
 * docs/operations.md, "Deno"):
 * - a socket handed over with pause/unshift/emit("connection") loses or
 *   garbles buffered bytes now and then (HPE_INVALID_METHOD: the connection
 *   is reset, about 1 in 150 requests under load): the HTTP/1.1 server gets a
 *   stream that replays the bytes the peek read, then relays the socket;
 * - a server that is not listening closes each connection after one answer
 *   (deno#35609): the HTTP/1.1 server is made to say it listens.
 * - its HTTP/2 session answers a client's GOAWAY with a GOAWAY of its own,
 *   and under connection churn that aborts the process inside nghttp2
 *   (denoland/deno#36788; docs/deno-http2.md): the session keeps quiet
 *   instead (quietOnPeerGoaway);
 * - each write to a socket is a system call of its own: a turn's writes are
 *   gathered into one (coalesceWrites).
 * Node needs none of it, and gets none: its hand-off keeps the socket's
 * native handle (no JavaScript stream in between). HTTP/2 is handed over as
 * on Node under both runtimes: a replaying stream made no difference there.
 */
import type { Server } from "node:http";
import type { Http2Session } from "node:http2";
import type { Socket } from "node:net";
import { Duplex } from "node:stream";

/** True under Deno. */
export const underDeno = "Deno" in globalThis;

/** Makes an HTTP server that is handed its connections say it listens, so Deno keeps them alive. */
export function markListening(server: Server): void {
  Object.defineProperty(server, "listening", { get: () => true, configurable: true });
}

/**
 * Stops `session` from answering the peer's GOAWAY with its own. Deno's
 * node:http2 (2.9.6) calls `session.close()` when a GOAWAY arrives, from
 * inside nghttp2's receive callback: the GOAWAY it submits there, on a
 * connection whose client has a stream in flight, aborts the process now and
 * then (nghttp2's `find_stream_on_goaway_func` assertion, a segfault, or
 * glibc's `free()` check: memory corrupted in Deno's native session). Every
 * gRPC client that closes its channel sends that GOAWAY. Nothing is lost by
 * keeping quiet: the client has said it opens no new stream, its streams in
 * flight are answered, and it closes the connection once they are, which
 * ends the session (one that never does is closed by the idle timeout, which
 * did not crash Deno: docs/deno-http2.md). Returns the session's own `close()`, for the server's
 * drain (a GOAWAY sent from outside a receive callback, before the client's).
 */
export function quietOnPeerGoaway(session: Http2Session): () => void {
  const close = session.close.bind(session);
  let peerSaidGoaway = false;
  // "goaway" is emitted just before the polyfill's close(): the flag is set when close() is called.
  session.on("goaway", () => {
    peerSaidGoaway = true;
  });
  session.close = (callback?: () => void): void => {
    if (peerSaidGoaway) return;
    close(callback);
  };
  return () => close();
}

/**
 * Gathers what is written to `socket` in one turn of the event loop into one
 * write (Deno only). Deno's node:http2 writes each frame it has ready as a
 * socket write of its own, and each is a system call: a REST GET over HTTP/2
 * spent 40 µs of its ~195 µs there, against 4 µs under Node, whose session
 * writes from its native handle (BENCHMARKS.md, "Deno's writes gathered").
 * The first write of a turn corks the socket; the turn's end (setImmediate,
 * after the turn's I/O callbacks) uncorks it, and Deno's socket sends
 * everything corked in one writev. What is written is unchanged, and so is
 * backpressure: a corked write past the socket's high-water mark answers false
 * and the writer waits for 'drain' as before.
 */
export function coalesceWrites(socket: Socket): void {
  const write = socket.write;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>): boolean {
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(uncork);
    }
    return write.apply(this, args);
  } as Socket["write"];
}

/**
 * A stream that reads `seen` (the bytes the peek consumed), then whatever
 * `socket` reads, and writes to `socket`: what an HTTP server takes for a
 * socket. It has the socket methods and properties Deno's HTTP server calls
 * (without `setTimeout` Deno crashes when an answer finishes).
 */
export function replayingSocket(socket: Socket, seen: Buffer): Duplex {
  const relay = new ReplayingSocket(socket);
  relay.push(seen);
  return relay;
}

class ReplayingSocket extends Duplex {
  readonly #socket: Socket;

  constructor(socket: Socket) {
    super({ allowHalfOpen: false });
    this.#socket = socket;
    socket.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on("end", () => this.push(null));
    socket.on("error", (error) => this.destroy(error));
    socket.on("close", () => this.destroy());
    socket.on("timeout", () => this.emit("timeout"));
    socket.resume();
  }

  override _read(): void {
    this.#socket.resume();
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#socket.write(chunk, encoding, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#socket.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#socket.destroy();
    callback(error);
  }

  setTimeout(ms: number, onTimeout?: () => void): this {
    this.#socket.setTimeout(ms);
    if (onTimeout !== undefined) this.once("timeout", onTimeout);
    return this;
  }

  setNoDelay(noDelay?: boolean): this {
    this.#socket.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, initialDelay?: number): this {
    this.#socket.setKeepAlive(enable, initialDelay);
    return this;
  }

  get remoteAddress(): string | undefined {
    return this.#socket.remoteAddress;
  }
  get remotePort(): number | undefined {
    return this.#socket.remotePort;
  }
  get remoteFamily(): string | undefined {
    return this.#socket.remoteFamily;
  }
  get localAddress(): string | undefined {
    return this.#socket.localAddress;
  }
  get localPort(): number | undefined {
    return this.#socket.localPort;
  }
}
