/**
 * `asor import a2a <agent-url> [-o <file>]`: the agent's live card, read as the A2A SDKs resolve it (the
 * registry's own prober, probe/live-card-fetch.ts, allowed every address: the CLI runs on its user's behalf),
 * as a definition file (a2a-card-map.ts), checked by `validate`'s rules. Exit 0 when the file is a valid
 * definition, 1 when it needs editing first (its problems printed), 3 when no card could be read.
 */
import { writeFile } from "node:fs/promises";
import { parseProbeAllowance } from "../probe/address-guard.js";
import { fetchLiveCard, liveCardUrl } from "../probe/live-card-fetch.js";
import { definitionFromCard } from "./a2a-card-map.js";
import { readDefinitionFile } from "./definition-files.js";
import { CliFailure, EXIT_OK, EXIT_PROBLEMS, EXIT_REGISTRY, usageFailure } from "./exit-codes.js";
import type { Output } from "./output.js";
import { type DefinitionRules, definitionProblems, problemLine } from "./validate.js";

const LIMITS = {
  timeoutMs: 10_000,
  maxBodyBytes: 1024 * 1024,
  maxRedirects: 5,
  allowance: parseProbeAllowance("0.0.0.0/0 ::/0"),
  userAgent: "asor (agent-definition-registry CLI)",
};

export async function importCommand(
  args: readonly string[],
  out: string | undefined,
  rules: DefinitionRules,
  output: Output,
): Promise<number> {
  const [kind, agentUrl, ...more] = args;
  if (kind !== "a2a" || agentUrl === undefined || more.length > 0)
    throw usageFailure("usage: asor import a2a <agent-url> [-o <file>]");
  if (!URL.canParse(agentUrl)) throw usageFailure(`"${agentUrl}" is not a URL`);
  const fetched = await fetchLiveCard(agentUrl, LIMITS);
  if (!fetched.ok)
    throw new CliFailure(
      EXIT_REGISTRY,
      `no card at ${liveCardUrl(agentUrl).href}: ${fetched.kind}: ${fetched.message}`,
    );
  const { definition, unmapped, notes } = definitionFromCard(fetched.card);
  const json = `${JSON.stringify(definition, null, 2)}\n`;
  const file = out ?? "(stdout)";
  const read = readDefinitionFile(file, new TextEncoder().encode(json));
  const problems = [...read.problems, ...read.definitions.flatMap((d) => definitionProblems(d, rules))];
  if (out === undefined) output.raw(json);
  else await writeFile(out, json);
  for (const note of notes) output.message(`note: ${note}`);
  for (const path of unmapped) output.message(`not mapped: ${path}`);
  if (out !== undefined) output.line(`wrote ${out} from ${liveCardUrl(agentUrl).href}`);
  for (const problem of problems) {
    if (out === undefined) output.message(problemLine(output, problem));
    else output.line(problemLine(output, problem));
  }
  if (out !== undefined) output.document({ file: out, unmapped, notes, problems });
  return problems.length === 0 ? EXIT_OK : EXIT_PROBLEMS;
}
