/** The command line of `asor`: one set of flags for every command (each command reads those it takes). */
import { parseArgs } from "node:util";
import { usageFailure } from "./exit-codes.js";
import type { OutputFormat } from "./output.js";

export const USAGE = `usage: asor <command> [flags]

commands:
  validate <files|dirs>...          check definition files offline, as the registry would
  diff -f <dir>                     what apply would do (exit 1 when it would change anything)
  apply -f <dir> [--dry-run] [--prune]
                                    create or update the directory's definitions by name, provider and version
  get <id>                          one definition (a version's id or Agent_ID=...)
  list [<param>=<value>...]         definitions, with the list's filters (name=, provider=, tag=, status=...)
  export -o <dir> [<param>=<value>...]
                                    one file per definition, read-only members left out
  import a2a <agent-url> [-o <file>]
                                    a definition file from an agent's live A2A card

flags:
  --url <url>        the registry (default: $ASOR_URL)
  --token <token>    a bearer token (default: $ASOR_TOKEN)
  --tenant <tenant>  the tenant (default: the token's)
  --output json      results as one JSON document, for scripts (default: text)
  -h, --help         this text

exit codes: 0 ok, 1 problems found, 2 usage, 3 the registry refused or could not be reached`;

export interface CliArgs {
  readonly command: string | undefined;
  readonly positionals: readonly string[];
  readonly url: string | undefined;
  readonly token: string | undefined;
  readonly tenant: string | undefined;
  readonly output: OutputFormat;
  readonly files: readonly string[];
  readonly out: string | undefined;
  readonly dryRun: boolean;
  readonly prune: boolean;
  readonly help: boolean;
}

/** The parsed command line; throws a usage failure on an unknown flag or a malformed value. */
export function parseCliArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): CliArgs {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw usageFailure(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  const output = values.output ?? "text";
  if (output !== "text" && output !== "json") throw usageFailure(`--output must be text or json, not "${output}"`);
  const token = values.token ?? env.ASOR_TOKEN;
  return {
    command: positionals[0],
    positionals: positionals.slice(1),
    url: nonEmpty(values.url ?? env.ASOR_URL),
    token: nonEmpty(token?.replace(/^Bearer\s+/i, "")),
    tenant: nonEmpty(values.tenant),
    output,
    files: values.file ?? [],
    out: values.out,
    dryRun: values["dry-run"] ?? false,
    prune: values.prune ?? false,
    help: values.help ?? false,
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: "string" },
      token: { type: "string" },
      tenant: { type: "string" },
      output: { type: "string" },
      file: { type: "string", short: "f", multiple: true },
      out: { type: "string", short: "o" },
      "dry-run": { type: "boolean" },
      prune: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}

const nonEmpty = (value: string | undefined): string | undefined =>
  value === undefined || value.trim() === "" ? undefined : value.trim();
