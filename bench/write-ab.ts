/**
 * Write throughput of two checkouts in one process, on MariaDB:
 * `npx tsx bench/write-ab.ts --a <dir> --b <dir> [--slices 12] [--slice-ms 1500] [--in-flight 10]`.
 *
 * Each checkout's own repository and service (src/storage/sql-repository.ts,
 * src/service/registry-service.ts), each on a database of its own, migrated by
 * its own migrations (what `npm run bench -- --service` cannot do when the two
 * differ in schema), 200 definitions seeded; then slices of `--slice-ms`, A and
 * B alternating and the order reversed every other pair, `--in-flight` upserts
 * at a time: POST of an existing key (the overview changes every time, as the
 * bench's update does), POST of a new agent (a new name every time), and POST of
 * an existing key whose 30 words of overview all change (an edit's lost terms). Prints
 * each build's mean calls per second over its slices and B's ratio to A. Made
 * for issue 20's limit (the revision counter may cost at most 10 % of either);
 * the HTTP bench's noise on a shared 2-core machine hid a difference that size.
 */
import { parseArgs } from "node:util";
import mysql from "mysql2/promise";

const { values } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    slices: { type: "string", default: "12" },
    "slice-ms": { type: "string", default: "1500" },
    "in-flight": { type: "string", default: "10" },
    mysql: { type: "string", default: process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306" },
  },
});
if (values.a === undefined || values.b === undefined) {
  console.error("usage: npx tsx bench/write-ab.ts --a <checkout> --b <checkout>");
  process.exit(2);
}
const slices = Number(values.slices);
const sliceMs = Number(values["slice-ms"]);
const inFlight = Number(values["in-flight"]);
const SEEDED = 200;

interface Build {
  readonly label: string;
  upsert(name: string, overview: string): Promise<unknown>;
  close(): Promise<void>;
}

async function openBuild(label: string, dir: string, database: string): Promise<Build> {
  const admin = await mysql.createConnection(values.mysql as string);
  await admin.query(`DROP DATABASE IF EXISTS ${database}`);
  await admin.query(`CREATE DATABASE ${database} CHARACTER SET utf8mb4`);
  await admin.end();
  const storage = await import(`${dir}/src/storage/sql-repository.ts`);
  const service = await import(`${dir}/src/service/registry-service.ts`);
  const protobuf = await import(`${dir}/node_modules/@bufbuild/protobuf/dist/esm/index.js`);
  const messages = await import(`${dir}/gen/asor/v1/agent_definition_service_pb.ts`);
  const repository = await storage.createSqlRepository({ databaseUrl: `${values.mysql}/${database}` });
  const registry = service.createRegistryService({
    repository,
    host: { providerId: "Provider=HOST", platformId: "Platform=HOST" },
  });
  const upsert = (name: string, overview: string) =>
    registry.upsert(
      "default",
      protobuf.create(messages.UpsertAgentDefinitionRequestSchema, {
        agentCardAndTools: {
          name,
          description: `The ${name} agent files expense reports.`,
          overview,
          url: "https://agents.example.com/a",
          version: "1.0.0",
          provider: { id: "Provider=Acme" },
          skills: [{ id: "file", name: "File", description: "Files one report.", tags: [{ tag: "finance" }] }],
        },
      }),
      { mayReactivate: true },
    );
  for (let i = 0; i < SEEDED; i++) await upsert(`Seeded ${i}`, "first");
  return { label, upsert, close: () => repository.close() };
}

/** Calls per second of `call` with inFlight at a time for sliceMs. */
async function slice(call: (n: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  let calls = 0;
  let next = 0;
  const lane = async () => {
    while (performance.now() - started < sliceMs) {
      await call(next++);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return calls / ((performance.now() - started) / 1000);
}

/** An overview of 30 words, all different between `set` 0 and 1. */
const thirtyWords = (set: number): string => Array.from({ length: 30 }, (_, i) => `set${set}word${i}`).join(" ");

const builds = [await openBuild("A", values.a, "asor_write_ab_a"), await openBuild("B", values.b, "asor_write_ab_b")];
const scenarios: Record<string, (build: Build, n: number) => Promise<unknown>> = {
  "existing key": (build, n) => build.upsert(`Seeded ${n % SEEDED}`, `overview ${n} ${Math.random()}`),
  "new agent": (build, n) => build.upsert(`New ${build.label} ${Date.now()} ${n} ${Math.random()}`, "new"),
  // Each write of a key replaces all 30 words of its overview by 30 others (its writes are SEEDED calls apart).
  "rewritten words": (build, n) => build.upsert(`Seeded ${n % SEEDED}`, thirtyWords(Math.floor(n / SEEDED) % 2)),
};
try {
  for (const [scenario, call] of Object.entries(scenarios)) {
    const rates: Record<string, number[]> = { A: [], B: [] };
    for (let s = 0; s < slices; s++) {
      const order = s % 2 === 0 ? builds : [...builds].reverse();
      for (const build of order) rates[build.label]?.push(await slice((n) => call(build, n)));
    }
    const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
    const a = mean(rates.A ?? []);
    const b = mean(rates.B ?? []);
    console.log(
      `${scenario}: A ${a.toFixed(0)}/s, B ${b.toFixed(0)}/s, B/A ${(b / a).toFixed(2)} ` +
        `(${slices} slices of ${sliceMs} ms each, ${inFlight} in flight)`,
    );
  }
} finally {
  for (const build of builds) await build.close();
}
