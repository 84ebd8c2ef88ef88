import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { testDatabases } from "../support/databases.js";
import { exampleDefinition } from "../support/definitions.js";
import { type TestServer, useServer } from "../support/server.js";

const run = promisify(execFile);
/** buf from node_modules, through the project's wrapper (see scripts/buf.mjs). */
const BUF = ["scripts/buf.mjs"];
const SERVICE = "asor.v1.AgentDefinitionService";

/** `buf curl` as the README shows it: the committed descriptor image as the schema. */
async function bufCurl(server: TestServer, method: string, data: unknown, protocol: "grpc" | "connect"): Promise<any> {
  const transport = protocol === "grpc" ? ["--protocol", "grpc", "--http2-prior-knowledge"] : ["--protocol", "connect"];
  const { stdout } = await run("node", [
    ...BUF,
    "curl",
    "--schema",
    "gen/asor.binpb",
    ...transport,
    "--header",
    `Authorization: ${server.authorization}`,
    "--data",
    JSON.stringify(data),
    `${server.baseUrl}/${SERVICE}/${method}`,
  ]);
  return JSON.parse(stdout);
}

describe("buf curl against a running server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);

  it.each(["grpc", "connect"] as const)("upserts, gets and lists over %s", async (protocol) => {
    const def = { ...exampleDefinition(), version: `buf-curl-${protocol}` };
    const created = await bufCurl(server(), "UpsertAgentDefinition", { agentCardAndTools: def }, protocol);
    expect(created.id).toMatch(/^[0-9a-f]{32}$/);
    const got = await bufCurl(server(), "GetAgentDefinition", { id: created.id }, protocol);
    expect(got).toEqual(created);
    const list = await bufCurl(server(), "ListAgentDefinitions", { limit: 100 }, protocol);
    expect(list.data.map((d: any) => d.id)).toContain(created.id);
  });

  it("shows the validation error detail of a failed call", async () => {
    const err = await bufCurl(server(), "GetAgentDefinition", { id: "missing" }, "connect").catch((e: unknown) => e);
    // buf curl prints a failed call's error on stderr and exits non-zero.
    const body = JSON.parse((err as { stderr: string }).stderr);
    expect(body.code).toBe("not_found");
    expect(body.details[0].debug.errors[0]).toMatchObject({ code: "NOT_FOUND", path: "id" });
  });
});
