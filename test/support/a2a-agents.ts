/**
 * A2A agents on loopback for the prober's tests (issue 44): each serves its card with @a2a-js/sdk's own card
 * handler, or misbehaves (never answers, answers too much), and counts the requests it gets.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AgentCard } from "@a2a-js/sdk";
import { agentCardHandler } from "@a2a-js/sdk/server/express";
import express from "express";

/** An agent listening on loopback. */
export interface TestAgent {
  /** Its `url`, as a definition registers it: the card is at `<url>.well-known/agent-card.json`. */
  readonly url: string;
  /** The requests it got so far. */
  readonly requests: number;
  /** The User-Agents its requests carried, and when each request came (Date.now()): the card agents only. */
  readonly userAgents?: ReadonlySet<string>;
  readonly times?: readonly number[];
  close(): Promise<void>;
}

async function listening(server: Server, host: string): Promise<string> {
  server.listen(0, host);
  await once(server, "listening");
  return `http://${host}:${(server.address() as AddressInfo).port}/`;
}

function closing(server: Server): () => Promise<void> {
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}

/**
 * An A2A agent serving what `card()` answers at the time of each request (a2a-js's agentCardHandler); 503 while it
 * answers undefined.
 */
export async function cardAgent(
  card: () => Record<string, unknown> | undefined,
  host = "127.0.0.1",
): Promise<TestAgent> {
  let requests = 0;
  const userAgents = new Set<string>();
  const times: number[] = [];
  const app = express();
  app.use((req, res, next) => {
    requests++;
    times.push(Date.now());
    userAgents.add(req.headers["user-agent"] ?? "");
    if (card() === undefined) res.status(503).end();
    else next();
  });
  app.use(
    "/.well-known/agent-card.json",
    agentCardHandler({ agentCardProvider: async () => card() as unknown as AgentCard }),
  );
  const server = createServer(app);
  const url = await listening(server, host);
  return {
    url,
    get requests() {
      return requests;
    },
    userAgents,
    times,
    close: closing(server),
  };
}

/** An agent that takes each request and never answers it. */
export async function silentAgent(): Promise<TestAgent> {
  let requests = 0;
  const server = createServer(() => {
    requests++;
  });
  const url = await listening(server, "127.0.0.1");
  return {
    url,
    get requests() {
      return requests;
    },
    close: closing(server),
  };
}

/** An agent that answers `bytes` bytes of JSON, without a Content-Length (the prober counts them as they come). */
export async function largeAgent(bytes: number): Promise<TestAgent> {
  let requests = 0;
  const chunk = Buffer.alloc(64 * 1024, " ");
  const server = createServer((_req, res) => {
    requests++;
    res.writeHead(200, { "content-type": "application/json" });
    // The prober hangs up once it has had too much: what is left is not written.
    res.on("error", () => undefined);
    let sent = 0;
    const more = () => {
      while (sent < bytes) {
        if (res.destroyed) return;
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", more);
      }
      res.end("{}");
    };
    more();
  });
  const url = await listening(server, "127.0.0.1");
  return {
    url,
    get requests() {
      return requests;
    },
    close: closing(server),
  };
}

/** A loopback URL on which nothing listens (a port taken and given back). */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  const url = await listening(server, "127.0.0.1");
  await closing(server)();
  return url;
}
