/**
 * GET of an agent card on two checkouts side by side (issue 43: signed >= 0.9x unsigned), paired in time so
 * that other work on the machine weighs on both alike:
 *
 *   node --import tsx bench/card-ab.ts <base checkout> [rounds] [seconds] [head checkout]
 *
 * (default head: this checkout; the base again gives an A/A run, the machine's noise alone). Both services run
 * at once, as npm start runs them (embedded SQLite, each its own data dir, built first), each seeded with the same
 * 200 bench definitions; after a warm-up that reads every card, `rounds` times `seconds` of REST GETs of the cards
 * (autocannon, 10 connections, the ids in turn) on each, in turn base-head and head-base. Prints each round's rps
 * and the server's CPU per request, the medians of the rounds' paired ratios and the ratios of the medians.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import autocannon from "autocannon";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { benchDefinition } from "./definition.js";
import { cpuSeconds } from "./proc-stats.js";
import { type ServerProcess, serviceCommand, startServer } from "./processes.js";

const [baseDir, roundsArg, secondsArg, headDir] = process.argv.slice(2);
if (baseDir === undefined)
  throw new Error("usage: node --import tsx bench/card-ab.ts <base checkout> [rounds] [seconds]");
const rounds = Number(roundsArg ?? 6);
const seconds = Number(secondsArg ?? 4);
const DEFINITIONS = 200;
const PATH = "/api/asor/v1/default/agentDefinition";

interface Side {
  readonly name: string;
  readonly server: ServerProcess;
  readonly authorization: string;
  readonly ids: string[];
  readonly rps: number[];
  readonly cpuUs: number[];
}

async function start(name: string, dir: string | undefined, work: string): Promise<Side> {
  const dataDir = join(work, name);
  const env = { PORT: "0", DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "info" };
  const server = await startServer(name, serviceCommand(dir), "agent definition registry listening", env, work);
  const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
  const token = await issuer.issue({ tenant: "default", domains: ["Development", "Setup: Agents"] });
  const authorization = `Bearer ${token}`;
  const ids: string[] = [];
  for (let i = 0; i < DEFINITIONS; i++) {
    const res = await fetch(`${server.baseUrl}${PATH}`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify(benchDefinition(`Card bench agent ${i}`)),
    });
    if (res.status !== 201) throw new Error(`${name}: POST answered ${res.status}: ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  return { name, server, authorization, ids, rps: [], cpuUs: [] };
}

async function load(side: Side, duration: number): Promise<void> {
  let next = 0;
  const cpu0 = cpuSeconds(side.server.pid);
  const result = await autocannon({
    url: side.server.baseUrl,
    connections: 10,
    duration,
    requests: [
      {
        method: "GET",
        headers: { authorization: side.authorization },
        setupRequest: (req) => ({ ...req, path: `${PATH}/${side.ids[next++ % side.ids.length]}/agentCard` }),
      },
    ],
  });
  const cpu = cpuSeconds(side.server.pid) - cpu0;
  if (result.non2xx + result.errors > 0) throw new Error(`${side.name}: ${result.non2xx + result.errors} failures`);
  side.rps.push(result["2xx"] / result.duration);
  side.cpuUs.push((cpu * 1e6) / result["2xx"]);
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const work = await mkdtemp(join(tmpdir(), "card-ab-"));
const base = await start("base", resolve(baseDir), work);
// Another head than this checkout (the base again: what the machine's noise alone makes of the ratio).
const head = await start("head", headDir === undefined ? undefined : resolve(headDir), work);
try {
  // Warm-up, unmeasured: every card read once (this checkout signs each revision then), and the JIT warm.
  for (const side of [base, head]) await load(side, 3);
  for (const side of [base, head]) side.rps.length = side.cpuUs.length = 0;
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [base, head] : [head, base];
    for (const side of order) await load(side, seconds);
    const line = [base, head].map(
      (s) => `${s.name} ${s.rps.at(-1)!.toFixed(0)} rps ${s.cpuUs.at(-1)!.toFixed(0)} us/req`,
    );
    console.log(`round ${round + 1}: ${line.join(", ")}`);
  }
  // Each round's pair ran back to back, under about the same load of the machine: their ratios, then the median.
  const pairedRps = median(head.rps.map((rps, i) => rps / base.rps[i]!));
  const pairedCpu = median(head.cpuUs.map((us, i) => base.cpuUs[i]! / us));
  console.log(`paired: head/base rps ${pairedRps.toFixed(2)}x, requests per CPU second ${pairedCpu.toFixed(2)}x`);
  const ratio = median(head.rps) / median(base.rps);
  const cpuRatio = median(base.cpuUs) / median(head.cpuUs);
  console.log(
    `median: base ${median(base.rps).toFixed(0)} rps ${median(base.cpuUs).toFixed(0)} us/req, head ` +
      `${median(head.rps).toFixed(0)} rps ${median(head.cpuUs).toFixed(0)} us/req; ` +
      `head/base rps ${ratio.toFixed(2)}x, ` +
      `requests per CPU second ${cpuRatio.toFixed(2)}x`,
  );
} finally {
  await base.server.stop();
  await head.server.stop();
  await rm(work, { recursive: true, force: true });
}
