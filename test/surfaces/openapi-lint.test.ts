import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);

/** Offline: no usage data (Redocly's telemetry), no update check, no install-time analytics. */
const OFFLINE = {
  ...process.env,
  REDOCLY_TELEMETRY: "off",
  REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
  SCARF_ANALYTICS: "false",
  DO_NOT_TRACK: "1",
};

/** One problem a linter reports: which linter, its rule, where (a JSON pointer), how bad. */
interface Problem {
  readonly linter: "redocly" | "spectral";
  readonly rule: string;
  readonly at: string;
  readonly severity: "error" | "warning" | "info";
}

/** A linter exits 1 when it finds problems; its report is on stdout all the same. */
async function stdoutOf(command: string, args: string[]): Promise<string> {
  try {
    return (await run(process.execPath, [command, ...args], { env: OFFLINE, maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (error) {
    const { stdout } = error as { stdout?: string };
    if (stdout === undefined || stdout.trim() === "") throw error;
    return stdout;
  }
}

/** Redocly CLI's recommended rules (redocly.yaml at the root). */
async function redocly(): Promise<Problem[]> {
  const out = await stdoutOf("node_modules/@redocly/cli/bin/cli.js", ["lint", "gen/openapi.json", "--format=json"]);
  const report = JSON.parse(out) as {
    problems: { ruleId: string; severity: string; location: { pointer: string }[] }[];
  };
  return report.problems.map((p) => ({
    linter: "redocly",
    rule: p.ruleId,
    at: p.location[0]?.pointer ?? "",
    severity: p.severity === "error" ? "error" : p.severity === "warn" ? "warning" : "info",
  }));
}

/** Spectral's `spectral:oas` (.spectral.yaml at the root). */
async function spectral(): Promise<Problem[]> {
  const out = await stdoutOf("node_modules/@stoplight/spectral-cli/dist/index.js", [
    "lint",
    "gen/openapi.json",
    "--format=json",
    "--ruleset=.spectral.yaml",
  ]);
  const report = JSON.parse(out) as { code: string; severity: number; path: string[] }[];
  return report.map((p) => ({
    linter: "spectral",
    rule: p.code,
    at: `#/${p.path.map((t) => t.replaceAll("~", "~0").replaceAll("/", "~1")).join("/")}`,
    severity: p.severity === 0 ? "error" : p.severity === 1 ? "warning" : "info",
  }));
}

/** The responses no operation answers: 405 (any other method), 429 (a watch's, sent as an SSE event). */
const UNUSED_RESPONSES = /^#\/components\/responses\/(MethodNotAllowed|TooManyRequests)$/;

/** The warnings docs/api.md explains, each with where it may come from. */
const EXPLAINED: readonly { linter: Problem["linter"]; rule: string; at: RegExp }[] = [
  { linter: "redocly", rule: "info-license", at: /^#\/info$/ },
  { linter: "spectral", rule: "info-contact", at: /^#\/info$/ },
  { linter: "redocly", rule: "no-unused-components", at: UNUSED_RESPONSES },
  { linter: "spectral", rule: "oas3-unused-component", at: UNUSED_RESPONSES },
  { linter: "redocly", rule: "no-unused-components", at: /^#\/components\/securitySchemes\/OAuth2$/ },
  {
    linter: "spectral",
    rule: "oas3-operation-security-defined",
    at: /^#\/paths\/[^/]+\/[a-z]+\/security\/\d+\/bearerAuth\/\d+$/,
  },
];

/** docs/api.md from its heading "OpenAPI" to the next heading of the same level. */
function openApiSection(): string {
  const docs = readFileSync("docs/api.md", "utf8");
  const start = docs.indexOf("\n## OpenAPI\n");
  expect(start, 'docs/api.md has a section "## OpenAPI"').toBeGreaterThanOrEqual(0);
  const end = docs.indexOf("\n## ", start + 1);
  return docs.slice(start, end === -1 ? undefined : end);
}

describe("gen/openapi.json lints clean", () => {
  let problems: Problem[] = [];
  beforeAll(async () => {
    problems = (await Promise.all([redocly(), spectral()])).flat();
  });
  const explanation = (p: Problem) =>
    EXPLAINED.find((e) => e.linter === p.linter && e.rule === p.rule && e.at.test(p.at));

  it("both linters ran and found something to say (the explained warnings)", () => {
    expect(problems.some((p) => p.linter === "redocly")).toBe(true);
    expect(problems.some((p) => p.linter === "spectral")).toBe(true);
  });

  it("has no error, in Redocly's recommended rules or Spectral's spectral:oas", () => {
    expect(problems.filter((p) => p.severity === "error")).toEqual([]);
  });

  it("has no warning or note that docs/api.md does not explain", () => {
    expect(problems.filter((p) => explanation(p) === undefined)).toEqual([]);
  });

  it("explains in docs/api.md each warning it keeps, and each explanation's warning still comes", () => {
    const section = openApiSection();
    for (const e of EXPLAINED) {
      expect(section, `docs/api.md, "OpenAPI", explains ${e.rule}`).toContain(`**\`${e.rule}\`**`);
      expect(
        problems.some((p) => explanation(p) === e),
        `${e.linter} ${e.rule} at ${e.at} no longer comes: drop its explanation`,
      ).toBe(true);
    }
  });
});
