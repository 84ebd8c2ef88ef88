/**
 * What one request of a burst costs the service, in its own CPU time (/proc): `count` requests of one kind sent at
 * once, each on a connection of its own, raw sockets (the client's own cost kept small), the service's CPU seconds
 * read before and after. Kinds: a refused watch (its caller at WATCH_MAX_PER_TOKEN, whose watches are held open),
 * the same with a new token of that caller (minted for each round), a watch without a token (401), /healthz (the
 * floor: accept, peek, parse, answer, close), a list of an empty tenant. MAX_CONNECTIONS is 2,000 unless set: the
 * burst and the held watches stay below it. SERVICE_DIR=<checkout> runs another checkout's service (built with its
 * npm run build), for a before and after.
 *
 *   node --import tsx bench/flood-cost.ts [count] [rounds] [kinds: all | refused,watch,/healthz,list]
 *     [KEY=VALUE settings of the service...] [--flags of its node, e.g. --cpu-prof --cpu-prof-dir=/tmp/p]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { cpuSeconds, loadAverage } from "./proc-stats.js";
import { serviceCommand, startServer } from "./processes.js";

const [count = 1_000, rounds = 3] = process.argv.slice(2, 4).map(Number);
/** Which kinds to send, by the start of their names (e.g. "refused,/healthz"); all by default. */
const only = (process.argv[4] ?? "all").split(",");
const extra = process.argv.slice(5);
const settings = Object.fromEntries(
  extra.filter((arg) => !arg.startsWith("--")).map((kv) => kv.split("=", 2) as [string, string]),
);
const nodeArgs = extra.filter((arg) => arg.startsWith("--"));
const DOMAINS = ["Development", "Setup: Agents", "Setup: Tenants"];
const dataDir = await mkdtemp(join(tmpdir(), "flood-cost-"));
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
const bearer = async (tenant: string, subject?: string) =>
  `Bearer ${await issuer.issue({
    tenant,
    domains: DOMAINS,
    platformAdmin: tenant === "default" && subject === "admin",
    ttlSeconds: 3600,
    ...(subject === undefined ? {} : { subject }),
  })}`;
const service = await startServer(
  "the service",
  serviceCommand(process.env.SERVICE_DIR),
  "agent definition registry listening",
  { DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "info", MAX_CONNECTIONS: "2000", ...settings },
  dataDir,
  nodeArgs,
);

/** Sends `request` on `n` connections at once; resolves with the status lines' counts once every one has closed. */
function burst(n: number, request: string): Promise<Map<string, number>> {
  const statuses = new Map<string, number>();
  let left = n;
  return new Promise((resolve) => {
    for (let i = 0; i < n; i++) {
      let first = "";
      // Written, not ended: a client that half-closes after its request has an answer made later (any that
      // waits for the database, or its tenant's turn) dropped by Node's server, which ends such a connection.
      // The request's `Connection: close` has the service close it once answered.
      const socket = connect({ host: "127.0.0.1", port: service.port }, () => socket.write(request, "latin1"));
      socket.on("data", (chunk) => {
        if (first === "") first = chunk.toString("latin1", 0, chunk.indexOf(13));
      });
      socket.on("error", (error) => {
        first ||= error.message;
      });
      socket.on("close", () => {
        statuses.set(first, (statuses.get(first) ?? 0) + 1);
        if (--left === 0) resolve(statuses);
      });
    }
  });
}

const get = (path: string, authorization?: string) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${service.port}\r\n` +
  (authorization === undefined ? "" : `Authorization: ${authorization}\r\n`) +
  "Accept: text/event-stream\r\nConnection: close\r\n\r\n";

try {
  const flooder = await bearer("default");
  // The caller's WATCH_MAX_PER_TOKEN watches, held open, so that every watch after is refused.
  const perToken = Number(settings.WATCH_MAX_PER_TOKEN ?? 100);
  const held = Array.from({ length: perToken }, () => {
    const socket = connect({ host: "127.0.0.1", port: service.port }, () =>
      socket.write(
        get("/api/asor/v1/default/agentDefinitionEvents?since=0", flooder).replace("Connection: close\r\n", ""),
      ),
    );
    return new Promise<typeof socket>((resolve) => socket.once("data", () => resolve(socket)));
  });
  const open = await Promise.all(held);
  let minted = 0;
  const kinds: [string, string | (() => Promise<string>)][] = [
    ["refused watch (429)", get("/api/asor/v1/default/agentDefinitionEvents?since=0", flooder)],
    // The same caller with a token the service has not seen: every request of the burst brings it before its
    // first check has ended (a token is checked once, however many bring it: issue 50).
    [
      "refused watch with a new token (429)",
      async () => {
        const token = await issuer.issue({ tenant: "default", domains: DOMAINS, ttlSeconds: 3000 + ++minted });
        return get("/api/asor/v1/default/agentDefinitionEvents?since=0", `Bearer ${token}`);
      },
    ],
    ["watch without a token (401)", get("/api/asor/v1/default/agentDefinitionEvents?since=0")],
    ["/healthz", get("/healthz")],
    ["list of an empty tenant", get("/api/asor/v1/default/agentDefinition?limit=20", flooder)],
  ];
  for (let round = 0; round < rounds; round++)
    for (const [name, make] of kinds.filter(([name]) => only.some((o) => o === "all" || name.startsWith(o)))) {
      const request = typeof make === "string" ? make : await make();
      const before = cpuSeconds(service.pid);
      const start = performance.now();
      const statuses = await burst(count, request);
      const ms = performance.now() - start;
      const cpu = cpuSeconds(service.pid) - before;
      console.log(
        `${name}: ${count} at once, the service's CPU ${(cpu * 1000).toFixed(0)} ms ` +
          `(${((cpu * 1e6) / count).toFixed(0)} µs each), all answered in ${ms.toFixed(0)} ms; ` +
          `${[...statuses].map(([s, n]) => `${n} ${s}`).join(", ")}; load ${loadAverage().toFixed(2)}`,
      );
    }
  for (const socket of open) socket.destroy();
} finally {
  await service.stop();
  await rm(dataDir, { recursive: true, force: true });
}
