/**
 * The code blocks of docs/*.md (and the README's, which test/e2e/readme.test.ts runs): every one is run here or
 * there as written, or marked as not run in the markdown with its reason (test/support/doc-examples.ts).
 */

import { execFile } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { testDatabases } from "../support/databases.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import {
  buildDist,
  commandLines,
  DOC_FILES,
  docBlock,
  docBlocks,
  isCode,
  onServer,
  RUN_BLOCKS,
  runWithToken,
  startGatewayExample,
} from "../support/doc-examples.js";
import { useServer } from "../support/server.js";

const run = promisify(execFile);

describe("every code block of the README and docs/", () => {
  it.each(DOC_FILES)("%s: is run by a doc test or marked <!-- not run: why -->", (file) => {
    const claims = RUN_BLOCKS[file] ?? [];
    const unaccounted = docBlocks(file)
      .filter(isCode)
      .filter((block) => block.notRun === undefined && !claims.some((c) => block.text.startsWith(c.starts)))
      .map((block) => `${file}:${block.line}: ${block.text.split("\n")[0]}`);
    expect(unaccounted).toEqual([]);
    for (const claim of claims) expect(docBlock(file, claim.starts).lang).not.toBe("");
  });

  it("lists in RUN_BLOCKS only files that exist", () => {
    expect(Object.keys(RUN_BLOCKS).filter((file) => !DOC_FILES.includes(file))).toEqual([]);
  });
});

describe("docs/api.md's examples, run as written against one server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  const runLine = (line: string) => runWithToken(onServer(line, server().baseUrl), server().app.config.dataDir);

  it("npm run admin: creates acme with its prefix and sandbox without one, and lists them", async () => {
    await buildDist();
    const env = { ...process.env, DATA_DIR: server().app.config.dataDir, DATABASE_URL: "" };
    /** The JSON lines a command line prints (npm prints its own header first: the lines are run without -s). */
    const printed = async (line: string) =>
      (await run("bash", ["-c", line], { env })).stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l));
    const [acme, sandbox, list, ...more] = commandLines(docBlock("docs/api.md", "npm run admin -- tenant create"));
    expect(more).toEqual([]);
    expect(await printed(acme!)).toMatchObject([{ name: "acme", sequencePrefix: "ACME-" }]);
    expect(await printed(sandbox!)).toMatchObject([{ name: "sandbox" }]);
    expect((await printed(list!)).map((tenant) => tenant.name)).toEqual(["acme", "default", "sandbox"]);
    // What the comments say of a POST to each.
    const post = async (tenant: string) =>
      fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
        method: "POST",
        headers: { authorization: await server().bearer({ tenant }), "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition()),
      });
    const inAcme = await post("acme");
    expect(inAcme.status).toBe(201);
    expect((await inAcme.json()).reference_id).toBe("Agent_ID=ACME-1");
    const inSandbox = await post("sandbox");
    expect(inSandbox.status).toBe(400);
    expect(JSON.stringify(await inSandbox.json())).toContain("A2849");
  });

  it("npm run admin: reads and sets acme's settings, sets, lists and revokes a provider's keys", async () => {
    const env = { ...process.env, DATA_DIR: server().app.config.dataDir, DATABASE_URL: "" };
    const dir = await mkdtemp(join(tmpdir(), "asor-docs-"));
    try {
      const jwk = (kid: string) => ({
        ...(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }) as Record<string, string>),
        kid,
        alg: "EdDSA",
      });
      await writeFile(join(dir, "jwks.json"), JSON.stringify({ keys: [jwk("key-2025"), jwk("key-2026")] }));
      // The block's jwks.json, written in a directory of the test's own.
      const printed = async (line: string) =>
        (await run("bash", ["-c", line.replace(" jwks.json", ` ${join(dir, "jwks.json")}`)], { env })).stdout
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l));
      const [get, set, keys, list, revoke, ...more] = commandLines(
        docBlock("docs/api.md", "npm run admin -- tenant get acme"),
      );
      expect(more).toEqual([]);
      expect(await printed(get!)).toMatchObject([{ name: "acme", settings: { signatures: "OPTIONAL" } }]);
      expect(await printed(set!)).toMatchObject([{ name: "acme", settings: { signatures: "REQUIRED" } }]);
      const kids = (answer: { keys: { kid: string }[] }[]) => answer[0]?.keys.map((k) => k.kid);
      expect(kids(await printed(keys!))).toEqual(["key-2025", "key-2026"]);
      expect(kids(await printed(list!))).toEqual(["key-2025", "key-2026"]);
      expect(kids(await printed(revoke!))).toEqual(["key-2026"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("buf curl: lists the methods by reflection, and the definitions with the README's token", async () => {
    const [methods, list, ...more] = commandLines(
      docBlock("docs/api.md", "npm run -s buf -- curl --protocol grpc --http2-prior-knowledge --list-methods"),
    );
    expect(more).toEqual([]);
    const created = await fetch(`${server().baseUrl}/asor/v1/agentDefinition`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: "Listed Agent" })),
    });
    expect(created.status).toBe(201);
    expect((await runLine(methods!)).split("\n")).toContain("asor.v1.AgentDefinitionService/ListAgentDefinitions");
    const listed = JSON.parse(await runLine(list!));
    expect(listed.data.map((d: { name: string }) => d.name)).toContain("Listed Agent");
  });

  it("docs/mcp.md's curl: lists the four MCP tools with the README's token", async () => {
    const [line, ...more] = commandLines(docBlock("docs/mcp.md", "curl -s http://127.0.0.1:8080/mcp"));
    expect(more).toEqual([]);
    const answer = JSON.parse(await runLine(line!)) as { result: { tools: { name: string }[] } };
    expect(answer.result.tools.map((t) => t.name).sort()).toEqual([
      "get_agent",
      "get_agent_card",
      "list_agent_versions",
      "search_agents",
    ]);
  });
});

describe("docs/api.md's verify-card.mjs, run as written against a server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);

  it("verifies a served card with @a2a-js/sdk and the registry's JWKS, and fails on a card altered", async () => {
    const created = await fetch(`${server().baseUrl}/asor/v1/agentDefinition`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ ...exampleDefinition(), name: "Verified Agent", externalAgentID: "ext-verified" }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    // Beside the repository's node_modules, where @a2a-js/sdk is installed.
    const dir = await mkdtemp(join(tmpdir(), "verify-card-"));
    try {
      await symlink(resolve("node_modules"), join(dir, "node_modules"));
      await writeFile(join(dir, "verify-card.mjs"), `${docBlock("docs/api.md", "// verify-card.mjs").text}\n`);
      const env = { ...process.env, REGISTRY: server().baseUrl, TOKEN: server().authorization.slice("Bearer ".length) };
      const { stdout } = await run(process.execPath, ["verify-card.mjs", id], { cwd: dir, env });
      expect(stdout).toBe("verified: Verified Agent\n");
      // The same script on an altered card (a proxy that rewrites the name) fails.
      const altered = await fetch(`${server().baseUrl}/asor/v1/agentDefinition/${id}/agentCard`, {
        headers: { authorization: server().authorization },
      });
      const card = { ...((await altered.json()) as object), name: "Verified Agenu" };
      const script = `${docBlock("docs/api.md", "// verify-card.mjs").text}`.replace(
        "const card = await answer.json();",
        `await answer.arrayBuffer();\nconst card = ${JSON.stringify(card)};`,
      );
      await writeFile(join(dir, "altered.mjs"), `${script}\n`);
      await expect(run(process.execPath, ["altered.mjs", id], { cwd: dir, env })).rejects.toThrow(
        /No valid signatures found on agent card/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("docs/api.md's lint commands", () => {
  it("both pass on the committed document (warnings only)", async () => {
    const lines = commandLines(docBlock("docs/api.md", "npx redocly lint"));
    expect(lines).toEqual(["npx redocly lint gen/openapi.json", "npx spectral lint gen/openapi.json"]);
    // Offline, as docs/api.md says: redocly.yaml turns usage data off, and these turn off the rest.
    const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" };
    // Rejects on a non-zero exit: an error of either linter.
    await Promise.all(lines.map((line) => run("bash", ["-c", line], { env })));
  }, 120_000);
});

describe("docs/operations.md's express app, run as gateway.mjs against the package's built ./express export", () => {
  it("serves the registry at the root and the host's JSON route after it, and exits 0 after SIGTERM", async () => {
    await buildDist();
    const gateway = await startGatewayExample(docBlock("docs/operations.md", "// gateway.mjs"));
    let exited: number | string | null = "not stopped";
    try {
      const echo = await fetch(`${gateway.baseUrl}/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"hello":"host"}',
      });
      expect(await echo.json()).toEqual({ hello: "host" });
      const created = await fetch(`${gateway.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: gateway.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition()),
      });
      expect(created.status).toBe(201);
      expect(created.headers.get("location")).toMatch(/^\/api\/asor\/v1\/default\/agentDefinition\/[0-9a-f]{32}$/);
    } finally {
      exited = await gateway.stop();
    }
    expect(exited).toBe(0);
  }, 60_000);
});
