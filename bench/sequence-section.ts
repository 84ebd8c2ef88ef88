/**
 * How long a new agent's write holds the tenant's agent sequence (issue 24,
 * item 2), for one or more checkouts side by side: every other creator of an
 * agent in the tenant waits that long, so it bounds a tenant's new agents per
 * second however many clients send them.
 *
 *   node --import tsx bench/sequence-section.ts [--creates 200] [--rounds 4] <checkout> [<checkout>...]
 *
 * Each checkout's own service and repository (its src/, through tsx) create
 * new agents one at a time on a fresh MariaDB database of its own
 * (MYSQL_URL, default mysql://root@127.0.0.1:3306), in rounds that alternate
 * between the checkouts. Per create it times, with a proxy on the
 * WriteTransaction the service is handed, the section from the moment
 * findAgentByName returns (on MySQL it ends by locking the sequence) to the
 * moment the write's COMMIT has answered, and the whole write. One writer at
 * a time, so the section is the work inside it, not waits for other writers.
 * Prints the median and p90 of both per checkout, over all rounds.
 */
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import mysql from "mysql2/promise";
import { benchDefinition } from "./definition.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { creates: { type: "string", default: "200" }, rounds: { type: "string", default: "4" } },
});
const creates = Number(values.creates);
const rounds = Number(values.rounds);
const serverUrl = process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306";
if (positionals.length === 0) throw new Error("Name at least one checkout.");

interface Checkout {
  readonly dir: string;
  readonly database: string;
  readonly create: (name: string) => Promise<{ section: number; total: number }>;
  readonly close: () => Promise<void>;
  readonly sections: number[];
  readonly totals: number[];
}

async function administer(sql: string): Promise<void> {
  const connection = await mysql.createConnection(serverUrl);
  try {
    await connection.query(sql);
  } finally {
    await connection.end();
  }
}

async function open(dir: string): Promise<Checkout> {
  const src = (path: string) => import(resolve(dir, "src", path));
  const { createSqlRepository } = await src("storage/sql-repository.ts");
  const { createRegistryService } = await src("service/registry-service.ts");
  const { AgentDefinitionSchema } = await import(resolve(dir, "gen/asor/v1/agent_definition_pb.ts"));
  const { UpsertAgentDefinitionRequestSchema } = await import(
    resolve(dir, "gen/asor/v1/agent_definition_service_pb.ts")
  );
  const { fromJson } = await import("@bufbuild/protobuf");
  const database = `asor_bench_section_${randomBytes(4).toString("hex")}`;
  await administer(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  const repository = await createSqlRepository({
    databaseUrl: `${serverUrl}/${database}`,
    dataDir: "/tmp",
  });
  let lockedAt = 0;
  const timed = {
    ...repository,
    write: (tenant: string, work: (tx: unknown) => Promise<unknown>) =>
      repository.write(tenant, (tx: object) =>
        work(
          new Proxy(tx, {
            get(target, property) {
              const value = Reflect.get(target, property, target);
              if (typeof value !== "function") return value;
              return async (...args: unknown[]) => {
                const result = await value.apply(target, args);
                if (property === "findAgentByName") lockedAt = performance.now();
                return result;
              };
            },
          }),
        ),
      ),
  };
  const service = createRegistryService({
    repository: timed,
    host: { providerId: "Provider=HOST", platformId: "Platform=HOST" },
  });
  return {
    dir,
    database,
    sections: [],
    totals: [],
    async create(name) {
      const definition = fromJson(AgentDefinitionSchema, benchDefinition(name) as never);
      const started = performance.now();
      lockedAt = 0;
      await service.upsert("default", create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definition }), {
        mayReactivate: true,
      });
      const ended = performance.now();
      if (lockedAt === 0) throw new Error("findAgentByName was not called: not a new agent.");
      return { section: ended - lockedAt, total: ended - started };
    },
    async close() {
      await repository.close();
      await administer(`DROP DATABASE IF EXISTS \`${database}\``);
    },
  };
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};

const checkouts: Checkout[] = [];
try {
  for (const dir of positionals) checkouts.push(await open(dir));
  for (const checkout of checkouts) for (let i = 0; i < 20; i++) await checkout.create(`warm ${i}`);
  for (let round = 0; round < rounds; round++) {
    for (const checkout of checkouts) {
      for (let i = 0; i < creates; i++) {
        const { section, total } = await checkout.create(`round ${round} agent ${i}`);
        checkout.sections.push(section);
        checkout.totals.push(total);
      }
    }
  }
  console.log("| checkout | creates | sequence held: p50 / p90 ms | whole write: p50 / p90 ms |");
  console.log("|---|---:|---:|---:|");
  for (const c of checkouts)
    console.log(
      `| ${c.dir} | ${c.sections.length} | ${quantile(c.sections, 0.5).toFixed(2)} / ` +
        `${quantile(c.sections, 0.9).toFixed(2)} | ` +
        `${quantile(c.totals, 0.5).toFixed(2)} / ${quantile(c.totals, 0.9).toFixed(2)} |`,
    );
} finally {
  for (const checkout of checkouts) await checkout.close();
}
