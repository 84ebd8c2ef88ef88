import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { RUNTIMES, type ServerProcess, spawnServer } from "../support/server-process.js";

/**
 * The upsert key and both uniqueness rules under concurrent writers: two
 * service processes on one database, one under Node and one under Deno, on
 * MariaDB and on one SQLite file (each runtime with its own driver:
 * better-sqlite3, node:sqlite). Every request goes over REST.
 */
for (const db of testDatabases()) {
  describe.skipIf(db.skip)(`concurrent writers on ${db.name}`, () => {
    let database: FreshDatabase;
    let servers: ServerProcess[] = [];
    const tokens = new Map<string, string>();

    beforeAll(async () => {
      database = await db.create();
      const env = {
        DATA_DIR: database.dataDir,
        ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
      };
      // Two processes start and migrate the same fresh database at once, too.
      servers = await Promise.all(RUNTIMES.map((runtime) => spawnServer(env, runtime)));
      // Both processes share DATA_DIR, so they trust one local issuer key; mint tokens with it.
      const issuer = await openLocalIssuer(localIssuerKeyFile(database.dataDir), parseAuthConfig({}).config);
      const bearer = async (tenant: string) =>
        `Bearer ${await issuer.issue({ tenant, domains: ["Development", "Setup: Agents", "Setup: Tenants"] })}`;
      // The tenant admin RPCs take a platform operator's token: the platform admin claim.
      const operator = `Bearer ${await issuer.issue({ domains: ["Setup: Tenants"], platformAdmin: true })}`;
      const admin = createClient(
        TenantAdminService,
        createConnectTransport({
          baseUrl: servers[0]!.baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(operator)],
        }),
      );
      for (const name of ["keys", "race", "numbers"]) {
        await admin.createTenant({ name, sequencePrefix: `${name.toUpperCase()}-` });
        tokens.set(name, await bearer(name));
      }
    }, 120_000);

    afterAll(async () => {
      const codes = await Promise.all(servers.map((s) => s.stop()));
      expect(codes.every((c) => c === 0)).toBe(true);
      await database?.cleanup();
    });

    /** POSTs to the servers in turn. */
    const post = (i: number, tenant: string, def: unknown) =>
      fetch(`${servers[i % servers.length]!.baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: tokens.get(tenant)! },
        body: JSON.stringify(def),
      }).then(async (res) => ({ status: res.status, body: await res.json() }));

    const listAll = async (tenant: string) =>
      (
        await fetch(`${servers[0]!.baseUrl}/api/asor/v1/${tenant}/agentDefinition?limit=100`, {
          headers: { authorization: tokens.get(tenant)! },
        })
      ).json() as Promise<{
        total: number;
        data: any[];
      }>;

    it(
      "200 concurrent POSTs over 10 keys make exactly 10 instances, each with the content of one " + "request",
      async () => {
        const requests = Array.from({ length: 200 }, (_, i) =>
          minimalDefinition({ name: `Key ${i % 10}`, description: `request ${i}` }),
        );
        const answers = await Promise.all(requests.map((def, i) => post(i, "keys", def)));
        expect(answers.filter((a) => a.status !== 201)).toEqual([]);
        const { total, data } = await listAll("keys");
        expect(total).toBe(10);
        for (const instance of data) {
          const sent = requests.filter((r) => r.name === instance.name).map((r) => r.description);
          expect(sent).toContain(instance.description);
        }
        // Every answer for a key names the one instance that holds it.
        const idOf = new Map(data.map((d) => [d.name, d.id]));
        for (const a of answers) expect(a.body.id).toBe(idOf.get(a.body.name));
      },
    );

    it("two agents racing for one externalAgentID: exactly one wins, the other gets A3015", async () => {
      for (let round = 0; round < 10; round++) {
        const [a, b] = await Promise.all([
          post(0, "race", minimalDefinition({ name: `Racer A${round}`, externalAgentID: `shared-${round}` })),
          post(1, "race", minimalDefinition({ name: `Racer B${round}`, externalAgentID: `shared-${round}` })),
        ]);
        expect([a.status, b.status].sort()).toEqual([201, 400]);
        const loser = a.status === 400 ? a : b;
        expect(loser.body.errors).toEqual([expect.objectContaining({ code: "A3015", field: "externalAgentID" })]);
      }
    });

    it("100 concurrent new agents take 100 distinct, consecutive Agent_ID numbers", async () => {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) => post(i, "numbers", minimalDefinition({ name: `Agent ${i}` }))),
      );
      expect(answers.filter((a) => a.status !== 201)).toEqual([]);
      const numbers = answers
        .map((a) => Number(/^Agent_ID=NUMBERS-(\d+)$/.exec(a.body.reference_id)?.[1]))
        .sort((x, y) => x - y);
      expect(numbers).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    });
  });
}
