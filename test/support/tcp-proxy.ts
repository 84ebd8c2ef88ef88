import type { AddressInfo, Server, Socket } from "node:net";
import { connect, createServer } from "node:net";

/**
 * A TCP proxy on a loopback port, for making a server (the database) go away
 * and come back while its clients keep their configuration.
 */
export interface TcpProxy {
  /** The port it listens on; the same after `restore()`. */
  readonly port: number;
  /** `url` (e.g. a mysql:// URL) pointing at the proxy instead of the server behind it. */
  via(url: string): string;
  /** Stops listening and drops every open connection: to its clients the server is gone. */
  cut(): Promise<void>;
  /** Stops forwarding in both directions and leaves new connections unanswered: the server hangs. */
  stall(): void;
  /**
   * From now on, a connection whose client sends `marker` (e.g. a MySQL COM_QUERY of `COMMIT`) has that sent on
   * to the server, and nothing more of the server's answers passed back: the server did it, the client never
   * hears so. Until `restore()`.
   */
  holdRepliesAfter(marker: string): void;
  /** What clients have sent to the server since the proxy started: one buffer per connection, in their order. */
  sent(): Buffer[];
  /** Forwards new connections again, listening again on the same port if cut. */
  restore(): Promise<void>;
  /** Cuts, for good. */
  close(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 (any free port) to `host:port`. */
export async function createTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  let stalled = false;
  let holdAfter: Buffer | undefined;
  const sent: Buffer[][] = [];
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const newServer = (): Server =>
    createServer((client) => {
      track(client);
      client.on("error", () => client.destroy());
      if (stalled) return; // accepted, never answered
      const upstream = connect(target.port, target.host);
      track(upstream);
      const pair: [Socket, Socket] = [client, upstream];
      pairs.add(pair);
      client.once("close", () => pairs.delete(pair));
      client.pipe(upstream).pipe(client);
      const chunks: Buffer[] = [];
      sent.push(chunks);
      client.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        if (holdAfter === undefined || !chunk.includes(holdAfter)) return;
        upstream.unpipe(client);
        upstream.pause();
      });
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
  let server = newServer();
  const port = await listen(server, 0);

  const cut = (): Promise<void> =>
    new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  return {
    port,
    via(url) {
      const proxied = new URL(url);
      proxied.hostname = "127.0.0.1";
      proxied.port = String(port);
      return proxied.toString();
    },
    cut,
    stall() {
      stalled = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    holdRepliesAfter(marker) {
      holdAfter = Buffer.from(marker);
    },
    sent: () => sent.map((chunks) => Buffer.concat(chunks)),
    async restore() {
      stalled = false;
      holdAfter = undefined;
      if (server.listening) return;
      server = newServer();
      await listen(server, port);
    },
    close: cut,
  };
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
