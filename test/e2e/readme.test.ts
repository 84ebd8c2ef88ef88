import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { testDatabases } from "../support/databases.js";
import { useServer } from "../support/server.js";

const run = promisify(execFile);

/** The command lines of the README's ```sh blocks that start with `prefix`. */
function readmeCommands(prefix: string): string[] {
  const readme = readFileSync("README.md", "utf8");
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  return blocks.flatMap((b) => b.split("\n")).filter((line) => line.startsWith(prefix));
}

describe("the README's examples, run as written against a running server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  const onTestServer = (line: string) => line.replaceAll("http://127.0.0.1:8080", server().baseUrl);

  /**
   * Runs README lines after its `export TOKEN=...` line, in the server's data directory (whose issuer signs
   * the token).
   */
  const runWithToken = async (line: string) => {
    const [tokenLine] = readmeCommands("export TOKEN=");
    expect(tokenLine).toBeDefined();
    const env = { ...process.env, DATA_DIR: server().app.config.dataDir };
    return (await run("bash", ["-c", `${tokenLine}\n${onTestServer(line)}`], { env })).stdout;
  };

  it("curl: POST answers 201 with Location, then both lists show the definition", async () => {
    const lines = readmeCommands("curl ");
    expect(lines).toHaveLength(4);
    const [post, list, contractList, multipart] = lines as [string, string, string, string];
    const created = await runWithToken(post);
    expect(created).toMatch(/^HTTP\/1\.1 201/);
    const location = /^location: (\S+)/im.exec(created)?.[1];
    expect(location).toMatch(/^\/api\/asor\/v1\/default\/agentDefinition\/[0-9a-f]{32}$/);
    for (const command of [list, contractList]) {
      const body = JSON.parse(await runWithToken(command));
      expect(body.data.map((d: { name: string }) => d.name)).toContain("Hello Agent");
    }
    // The multipart form: a new version of the same agent.
    const second = JSON.parse(await runWithToken(multipart));
    expect(second).toMatchObject({ name: "Hello Agent", version: "1.1.0" });
    expect(second.reference_id).toBe(JSON.parse(created.slice(created.indexOf("{"))).reference_id);
  });

  it("buf curl: lists over gRPC", async () => {
    const [line] = readmeCommands("npm run -s buf -- curl");
    expect(line).toBeDefined();
    const body = JSON.parse(await runWithToken(line!));
    expect(body.total).toBeGreaterThanOrEqual(0);
  });
});
