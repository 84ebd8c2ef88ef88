/**
 * The registry's read-modify-writes, many at once on one database from two
 * repositories (as two processes would), through the service's real
 * operations: each decides on a row it read under a lock (MySQL: FOR UPDATE,
 * or the agent's lock; SQLite: one writer at a time), so of the writers that
 * read the same ETag exactly one wins, and no write's increment is lost
 * (docs/galera.md lists each with its lock; test/cluster/read-modify-write.test.ts
 * holds the same through three Galera nodes).
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DefinitionStatus } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  SetAgentDefinitionStatusRequestSchema,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { etagOf } from "../../src/domain/lifecycle.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, host } from "./fixtures.js";

const tenant = "default";
const admin = { mayReactivate: true };
const writers = 12;

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repositories: AgentDefinitionRepository[];
  let services: RegistryService[];
  let raw: Database;

  beforeAll(async () => {
    repositories = [await createSqlRepository(target()), await createSqlRepository(target())];
    services = repositories.map((repository) => createRegistryService({ repository, host }));
    raw = await openDatabase(target());
    // Every pool's connections open before the races: writers that each wait for a new connection
    // would start apart and not race at all.
    await Promise.all(repositories.flatMap((r) => Array.from({ length: writers }, () => r.listTenants())));
  });

  afterAll(async () => {
    await Promise.all((repositories ?? []).map((r) => r.close()));
    await raw?.db.destroy();
  });

  /** Writer i's service: the two repositories in turn. */
  const service = (i: number) => services[i % services.length] as RegistryService;

  /** What each of `writers` concurrent calls ended in: "ok", or the RegistryError's code. */
  const outcomes = async (write: (i: number) => Promise<unknown>): Promise<string[]> =>
    (
      await Promise.all(
        Array.from({ length: writers }, (_, i) =>
          write(i).then(
            () => "ok",
            (error: unknown) => {
              if (error instanceof RegistryError) return error.code;
              throw error;
            },
          ),
        ),
      )
    ).sort();

  /** Sorted outcomes: one "ok" after the others' 412. */
  const exactlyOneWins = [...Array(writers - 1).fill("PRECONDITION_FAILED"), "ok"];

  const stored = async (name: string) =>
    (
      await service(0).upsert(
        tenant,
        create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definition({ name }) }),
        admin,
      )
    ).stored;

  it("PUTs of one version with the same If-Match: exactly one wins, the others answer 412", async () => {
    const first = await stored(`Put race ${db.name}`);
    const results = await outcomes((i) =>
      service(i).update(
        tenant,
        create(UpdateAgentDefinitionRequestSchema, {
          id: first.id,
          etag: etagOf(first),
          agentCardAndTools: definition({ name: `Put race ${db.name}`, description: `writer ${i}` }),
        }),
        admin,
      ),
    );
    expect(results).toEqual(exactlyOneWins);
    expect((await repositories[0]!.get(tenant, first.id))?.revision).toBe(2);
  });

  it("POSTs to one key with the same If-Match: exactly one wins, the others answer 412", async () => {
    const first = await stored(`Post race ${db.name}`);
    const results = await outcomes((i) =>
      service(i).upsert(
        tenant,
        create(UpsertAgentDefinitionRequestSchema, {
          etag: etagOf(first),
          agentCardAndTools: definition({ name: `Post race ${db.name}`, description: `writer ${i}` }),
        }),
        admin,
      ),
    );
    expect(results).toEqual(exactlyOneWins);
    expect((await repositories[0]!.get(tenant, first.id))?.revision).toBe(2);
  });

  it("PATCHes of one version's status with the same If-Match: exactly one wins, the others answer 412", async () => {
    const first = await stored(`Patch race ${db.name}`);
    const results = await outcomes((i) =>
      service(i).setStatus(
        tenant,
        create(SetAgentDefinitionStatusRequestSchema, {
          id: first.id,
          etag: etagOf(first),
          statusChange: {
            status: i % 2 === 0 ? DefinitionStatus.DEPRECATED : DefinitionStatus.DEACTIVATED,
            statusMessage: `writer ${i}`,
          },
        }),
      ),
    );
    expect(results).toEqual(exactlyOneWins);
    expect((await repositories[0]!.get(tenant, first.id))?.revision).toBe(2);
  });

  it("PUTs and PATCHes of one version without If-Match lose no revision: each write counts once", async () => {
    const first = await stored(`Counted ${db.name}`);
    const results = await outcomes((i) =>
      i % 2 === 0
        ? service(i).update(
            tenant,
            create(UpdateAgentDefinitionRequestSchema, {
              id: first.id,
              agentCardAndTools: definition({ name: `Counted ${db.name}`, description: `writer ${i}` }),
            }),
            admin,
          )
        : service(i).setStatus(
            tenant,
            create(SetAgentDefinitionStatusRequestSchema, {
              id: first.id,
              statusChange: { status: DefinitionStatus.DEPRECATED, statusMessage: `writer ${i}` },
            }),
          ),
    );
    expect(results).toEqual(Array(writers).fill("ok"));
    expect((await repositories[0]!.get(tenant, first.id))?.revision).toBe(1 + writers);
  });

  it("the list's counters equal COUNT(*) after the concurrent writes", async () => {
    const counted = await raw
      .db("agent_definitions")
      .select("tenant", "status", "is_latest")
      .count({ n: "*" })
      .groupBy("tenant", "status", "is_latest")
      .orderBy(["tenant", "status", "is_latest"]);
    const kept = await raw
      .db("definition_counts")
      .select("tenant", "status", "is_latest")
      .sum({ n: "n" })
      .groupBy("tenant", "status", "is_latest")
      .havingRaw("SUM(n) <> 0")
      .orderBy(["tenant", "status", "is_latest"]);
    // Drivers answer counts and flags as numbers, bigints or strings: compared as numbers.
    const numbers = (rows: Array<Record<string, unknown>>) =>
      rows.map((r) => ({ ...r, is_latest: Number(r.is_latest), n: Number(r.n), kind: Number(r.kind ?? 0) }));
    expect(numbers(kept)).toEqual(numbers(counted));
    const terms = await raw
      .db("definition_terms")
      .select("tenant", "kind", "value", "status", "is_latest")
      .count({ n: "*" })
      .groupBy("tenant", "kind", "value", "status", "is_latest")
      .orderBy(["tenant", "kind", "value", "status", "is_latest"]);
    const termCounts = await raw
      .db("definition_term_counts")
      .select("tenant", "kind", "value", "status", "is_latest")
      .sum({ n: "n" })
      .groupBy("tenant", "kind", "value", "status", "is_latest")
      .havingRaw("SUM(n) <> 0")
      .orderBy(["tenant", "kind", "value", "status", "is_latest"]);
    expect(numbers(termCounts)).toEqual(numbers(terms));
  });
});
