import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { connect as http2Connect } from "node:http2";
import { createServer as createTcpServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { spawnAuthorizedServer } from "../support/authorized-process.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { startServer, type TestServer } from "../support/server.js";
import { spawnServer } from "../support/server-process.js";

const [sqlite, mariadb] = testDatabases();

/** The SETTINGS_MAX_CONCURRENT_STREAMS the server announces to an HTTP/2 client. */
async function announcedMaxConcurrentStreams(baseUrl: string): Promise<number | undefined> {
  const session = http2Connect(baseUrl);
  try {
    const settings = await new Promise<{ maxConcurrentStreams?: number }>((resolve, reject) => {
      session.once("remoteSettings", resolve);
      session.once("error", reject);
    });
    return settings.maxConcurrentStreams;
  } finally {
    session.close();
  }
}

/** Opens a Health/Watch and resolves with its first status, or the error that refused it. */
async function openWatch(baseUrl: string, signal: AbortSignal): Promise<Status | ConnectError> {
  const stream = createClient(Health, createGrpcTransport({ baseUrl }))
    .watch({ service: "" }, { signal })
    [Symbol.asyncIterator]();
  try {
    const first = await stream.next();
    if (first.done) throw new Error("the Watch ended without an answer");
    return first.value.status;
  } catch (error) {
    return ConnectError.from(error);
  }
}

describe("HTTP/2 concurrent streams", () => {
  let database: FreshDatabase;
  beforeAll(async () => {
    database = await sqlite!.create();
  });
  afterAll(async () => {
    await database?.cleanup();
  });

  it("announces at most 100 concurrent streams per connection by default", async () => {
    const server = await spawnServer({ DATA_DIR: database.dataDir });
    try {
      expect(await announcedMaxConcurrentStreams(server.baseUrl)).toBe(100);
    } finally {
      await server.stop();
    }
  });

  it("announces HTTP2_MAX_CONCURRENT_STREAMS when set", async () => {
    const server = await startServer(database, { HTTP2_MAX_CONCURRENT_STREAMS: "7" });
    try {
      expect(await announcedMaxConcurrentStreams(server.baseUrl)).toBe(7);
    } finally {
      await server.stop();
    }
  });
});

describe("Health/Watch", () => {
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  beforeAll(async () => {
    database = await sqlite!.create();
    server = await startServer(database, { HEALTH_MAX_WATCHES: "2" });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  it(
    "refuses a watch beyond HEALTH_MAX_WATCHES with RESOURCE_EXHAUSTED, and admits one again once a watch " + "ends",
    async () => {
      const first = new AbortController();
      const second = new AbortController();
      const third = new AbortController();
      const retries: AbortController[] = [];
      try {
        expect(await openWatch(server.baseUrl, first.signal)).toBe(Status.SERVING);
        expect(await openWatch(server.baseUrl, second.signal)).toBe(Status.SERVING);
        const refused = await openWatch(server.baseUrl, third.signal);
        expect(refused).toBeInstanceOf(ConnectError);
        expect((refused as ConnectError).code).toBe(Code.ResourceExhausted);
        // Check is not a watch: it is answered whatever the number of watches.
        expect(
          (await createClient(Health, createGrpcTransport({ baseUrl: server.baseUrl })).check({ service: "" })).status,
        ).toBe(Status.SERVING);

        first.abort();
        await expect
          .poll(
            async () => {
              const retry = new AbortController();
              retries.push(retry);
              return openWatch(server.baseUrl, retry.signal);
            },
            { timeout: 10_000 },
          )
          .toBe(Status.SERVING);
      } finally {
        for (const c of [first, second, third, ...retries]) c.abort();
      }
    },
  );
});

/** A TCP proxy to MariaDB that counts the readiness probes (`SELECT 1 FROM tenants LIMIT 1`) sent through it. */
async function countingProxy(target: URL): Promise<{ url: string; pings(): number; close(): Promise<void> }> {
  const needle = Buffer.from("SELECT 1 FROM tenants LIMIT 1");
  let pings = 0;
  const sockets = new Set<Socket>();
  const server: Server = createTcpServer((client) => {
    const upstream = tcpConnect(Number(target.port || 3306), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
      s.on("error", () => s.destroy());
    }
    // A COM_QUERY packet: 3 bytes of length, a sequence number, 0x03, then the statement.
    client.on("data", (chunk: Buffer) => {
      if (chunk.length === 5 + needle.length && chunk[4] === 0x03 && chunk.subarray(5).equals(needle)) pings++;
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const url = new URL(target);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    pings: () => pings,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe.skipIf(mariadb!.skip)("Health/Watch on MariaDB", () => {
  let database: FreshDatabase;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let server: TestServer & { stop(): Promise<void> };
  beforeAll(async () => {
    database = await mariadb!.create();
    proxy = await countingProxy(new URL(database.databaseUrl!));
    server = await startServer({ ...database, databaseUrl: proxy.url });
  });
  afterAll(async () => {
    await server?.stop();
    await proxy?.close();
    await database?.cleanup();
  });

  it("serves every open watch from one shared probe of the database, not one per watch", async () => {
    const watchers = 20;
    const watching = new AbortController();
    try {
      // One after the other, so that per-watch probes could not share a query in flight.
      for (let i = 0; i < watchers; i++) expect(await openWatch(server.baseUrl, watching.signal)).toBe(Status.SERVING);
      const before = proxy.pings();
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const during = proxy.pings() - before;
      // A probe per watch would be about one per watch per second (60 here); one shared probe is about one a second.
      expect(during).toBeGreaterThan(0);
      expect(during).toBeLessThan(watchers);
    } finally {
      watching.abort();
    }
  });
});

describe("DATA_DIR and the SQLite files", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "asor-modes-"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const mode = async (path: string): Promise<number> => (await stat(path)).mode & 0o777;
  const startOn = (dataDir: string) => spawnAuthorizedServer({ dataDir, cleanup: async () => undefined });
  const write = async (server: Awaited<ReturnType<typeof startOn>>, name: string): Promise<number> =>
    (
      await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name })),
      })
    ).status;

  it(
    "creates DATA_DIR readable by its owner only (0700), and the database with its -wal and -shm files " + "0600",
    async () => {
      const dataDir = join(root, "fresh", "data");
      const server = await startOn(dataDir);
      try {
        expect(await write(server, "Mode Agent")).toBe(201);
        expect(await mode(join(root, "fresh"))).toBe(0o700);
        expect(await mode(dataDir)).toBe(0o700);
        for (const file of ["registry.sqlite", "registry.sqlite-wal", "registry.sqlite-shm", "dev-issuer.jwk"]) {
          expect(await mode(join(dataDir, file)), file).toBe(0o600);
        }
      } finally {
        await server.stop();
      }
    },
  );

  it(
    "keeps working on an existing DATA_DIR and database made with wider modes, and narrows the database files to " +
      "0600",
    async () => {
      const dataDir = join(root, "existing");
      await mkdir(dataDir, { mode: 0o755 });
      await chmod(dataDir, 0o755);
      // An empty file is an empty SQLite database; as a previous version (or umask 022) left it.
      await writeFile(join(dataDir, "registry.sqlite"), "", { mode: 0o644 });
      await chmod(join(dataDir, "registry.sqlite"), 0o644);
      const server = await startOn(dataDir);
      try {
        expect(await write(server, "Existing Dir Agent")).toBe(201);
        // A directory that exists keeps its mode (README); only the database files are narrowed.
        expect(await mode(dataDir)).toBe(0o755);
        for (const file of ["registry.sqlite", "registry.sqlite-wal", "registry.sqlite-shm"]) {
          expect(await mode(join(dataDir, file)), file).toBe(0o600);
        }
      } finally {
        await server.stop();
      }
    },
  );
});
