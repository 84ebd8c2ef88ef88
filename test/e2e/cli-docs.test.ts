/**
 * docs/cli.md's sessions, run as written (bash, from the repository's root) against a registry on loopback:
 * the token made by `npm run token` for the server's DATA_DIR, the documented address aimed at the server, and
 * `exported/` at a temporary directory instead of the checkout.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/cli.js";
import { testDatabases } from "../support/databases.js";
import { commandLines, docBlock, docBlocks, onServer, runWithToken } from "../support/doc-examples.js";
import { builtDist } from "../support/npm-script.js";
import { useServer } from "../support/server.js";

const run = promisify(execFile);

describe("docs/cli.md's examples, run as written against one server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  let dir = "";
  let remove = async () => {};
  beforeAll(async () => {
    ({ dir, remove } = await tempDir());
    await builtDist();
  });
  afterAll(() => remove());

  const session = commandLines(docBlock("docs/cli.md", "export ASOR_URL="));
  /** Runs `lines` with bash (set -e) after the session's two `export` lines. */
  const bash = async (lines: readonly string[]) => {
    const exports = session.filter((l) => l.startsWith("export "));
    const script = ["set -e", ...exports, ...lines.filter((l) => !l.startsWith("export "))]
      .map((l) => onServer(l, server().baseUrl).replaceAll("exported/", `${dir}/exported/`))
      .join("\n");
    const env = { ...process.env, DATA_DIR: server().app.config.dataDir, DATABASE_URL: "", NO_COLOR: "1" };
    return (await run("bash", ["-c", script], { env, timeout: 120_000 })).stdout;
  };

  it("validates, diffs and applies examples/, then finds every definition unchanged", async () => {
    const out = await bash(session);
    expect(out).toContain("ok: 6 definition(s) in 5 file(s)");
    expect(out).toContain("if applied: 6 created, 0 updated, 0 unchanged, 0 deprecated");
    expect(out).toContain("6 created, 0 updated, 0 unchanged, 0 deprecated");
    expect(out).toContain("0 created, 0 updated, 6 unchanged, 0 deprecated");
    // The second apply's output, as the doc shows it.
    const shown = docBlocks("docs/cli.md").find((b) => b.lang === "text" && b.text.startsWith("unchanged "));
    expect(out).toContain(shown?.text);
  });

  it("README.md's lines, with its token: validate, then apply (all there already: unchanged)", async () => {
    const lines = commandLines(docBlock("README.md", "npm run -s asor -- validate examples/"));
    const out = await runWithToken(
      lines.map((l) => onServer(l, server().baseUrl)).join("\n"),
      server().app.config.dataDir,
      { NO_COLOR: "1", DATABASE_URL: "" },
    );
    expect(out).toContain("ok: 6 definition(s) in 5 file(s)");
    expect(out).toContain("0 created, 0 updated, 6 unchanged, 0 deprecated");
  });

  it("exports, applies the export with --prune (nothing changes), lists and gets", async () => {
    const out = await bash(commandLines(docBlock("docs/cli.md", "npm run -s asor -- export -o")));
    expect(out).toContain("6 definition(s) exported to");
    expect(out).toContain("0 created, 0 updated, 6 unchanged, 0 deprecated");
    expect(out).toContain("Expense Report Assistant 3.2.0 (Provider=Ledgerly)  ACTIVE");
    expect(out).toContain('"reference_id": "Agent_ID=AGENT-1"');
  });
});
