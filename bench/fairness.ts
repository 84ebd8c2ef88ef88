/**
 * `npm run bench -- --fairness` (issue 25, items 3 and 4), MariaDB only: one
 * tenant saturating the search gate, and searches whose clients reset them.
 *
 * 1. Saturation: SATURATING_CLIENTS loops of the bench tenant's costliest
 *    keyword search (`q` matching every definition) keep the gate full, while
 *    one loop of another tenant sends its own costly search (`q` matching
 *    every one of its definitions); that loop's latency is what a tenant feels
 *    when another one fills the gate (target: p99 <= 1 s).
 * 2. Resets: RESET_SEARCHES HTTP/2 requests of the bench tenant's costly
 *    search, each reset (RST_STREAM CANCEL) as soon as its HEADERS are sent;
 *    2 s after the last, the bench database's statements still running at
 *    MariaDB are counted (target: 0).
 */
import { connect as connectHttp2, constants as http2 } from "node:http2";
import { createConnection } from "mysql2/promise";

/** Loops of the saturating tenant. */
export const SATURATING_CLIENTS = 8;
/** Searches reset right after their HEADERS. */
export const RESET_SEARCHES = 24;
/** How long after the last reset the statements still running are counted. */
const AFTER_RESETS_MS = 2_000;
/** A word of every bench definition's description: the keyword search matching all of a tenant. */
export const EVERY_DEFINITION_WORD = "customer";

export interface FairnessOptions {
  readonly baseUrl: string;
  /** The saturating tenant's collection path and token. */
  readonly saturating: { readonly path: string; readonly authorization: string };
  /** The other tenant's. */
  readonly other: { readonly path: string; readonly authorization: string };
  readonly durationSeconds: number;
  /** The MariaDB server and the bench's database on it, for the process list. */
  readonly mysqlUrl: string;
  readonly database: string;
}

export interface FairnessResult {
  readonly saturating: { readonly requests: number; readonly errors: number; readonly p50: number };
  readonly other: {
    readonly requests: number;
    readonly errors: number;
    readonly p50: number;
    readonly p99: number;
    readonly max: number;
    readonly firstError?: string;
  };
  readonly resets: number;
  /** Statements of the bench database at MariaDB right after the resets were sent, and 2 s later. */
  readonly runningAtOnce: number;
  readonly runningAfter: number;
}

const percentile = (sorted: readonly number[], p: number): number =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number);

/** Loops GET `url` until `until`; the latencies (ms) of the 200s, the failures counted. */
async function loop(
  url: string,
  authorization: string,
  until: number,
): Promise<{ latencies: number[]; errors: number; firstError?: string }> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  while (Date.now() < until) {
    const started = performance.now();
    try {
      const res = await fetch(url, { headers: { authorization } });
      const body = await res.text();
      if (res.status === 200) latencies.push(performance.now() - started);
      else {
        errors++;
        firstError ??= `${res.status} ${body.slice(0, 200)}`;
      }
    } catch (error) {
      errors++;
      firstError ??= String(error);
    }
  }
  return { latencies, errors, ...(firstError === undefined ? {} : { firstError }) };
}

export async function runFairness(options: FairnessOptions): Promise<FairnessResult> {
  const query = `?q=${EVERY_DEFINITION_WORD}&limit=20`;
  const until = Date.now() + options.durationSeconds * 1000;
  const saturating = Array.from({ length: SATURATING_CLIENTS }, () =>
    loop(`${options.baseUrl}${options.saturating.path}${query}`, options.saturating.authorization, until),
  );
  // The other tenant starts once the gate is full.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const other = await loop(`${options.baseUrl}${options.other.path}${query}`, options.other.authorization, until);
  const saturated = await Promise.all(saturating);
  const all = saturated.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const mine = [...other.latencies].sort((a, b) => a - b);
  await quiet(options);

  const session = connectHttp2(options.baseUrl);
  session.on("error", () => undefined);
  const sent = await Promise.all(
    Array.from(
      { length: RESET_SEARCHES },
      () =>
        new Promise<void>((resolve) => {
          const stream = session.request({
            ":method": "GET",
            ":path": `${options.saturating.path}${query}`,
            authorization: options.saturating.authorization,
          });
          stream.on("error", () => undefined);
          stream.once("ready", () => {
            stream.close(http2.NGHTTP2_CANCEL);
            resolve();
          });
        }),
    ),
  );
  const runningAtOnce = await statementsRunning(options);
  await new Promise((resolve) => setTimeout(resolve, AFTER_RESETS_MS));
  const runningAfter = await statementsRunning(options);
  session.destroy();
  await quiet(options);
  return {
    saturating: { requests: all.length, errors: saturated.reduce((n, s) => n + s.errors, 0), p50: percentile(all, 50) },
    other: {
      requests: mine.length,
      errors: other.errors,
      p50: percentile(mine, 50),
      p99: percentile(mine, 99),
      max: mine.at(-1) ?? Number.NaN,
      ...(other.firstError === undefined ? {} : { firstError: other.firstError }),
    },
    resets: sent.length,
    runningAtOnce,
    runningAfter,
  };
}

async function withAdmin<T>(
  options: FairnessOptions,
  use: (c: Awaited<ReturnType<typeof createConnection>>) => Promise<T>,
): Promise<T> {
  const server = new URL(options.mysqlUrl);
  const c = await createConnection({
    host: server.hostname,
    port: Number(server.port || 3306),
    user: decodeURIComponent(server.username),
    password: decodeURIComponent(server.password),
  });
  try {
    return await use(c);
  } finally {
    await c.end();
  }
}

/** Statements of the bench database running at MariaDB now. */
function statementsRunning(options: FairnessOptions): Promise<number> {
  return withAdmin(options, async (c) => {
    const [rows] = await c.query(
      "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND ID <> " +
        "CONNECTION_ID()",
      [options.database],
    );
    return Number((rows as { n: number | string }[])[0]?.n ?? 0);
  });
}

/** Waits (up to 60 s) until no statement of the bench database runs. */
async function quiet(options: FairnessOptions): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await statementsRunning(options)) > 0 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 100));
}

/** The result as Markdown. */
export function fairnessReport(
  result: FairnessResult,
  sizes: { readonly saturating: number; readonly other: number },
  durationSeconds: number,
): string {
  const f = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "-");
  return [
    `#### One tenant saturating the gate (${SATURATING_CLIENTS} loops of \`q=${EVERY_DEFINITION_WORD}\` ` +
      `over ${sizes.saturating} definitions, ${durationSeconds} s), ` +
      `another tenant's \`q=${EVERY_DEFINITION_WORD}\` over its ${sizes.other}`,
    "",
    "| | requests | errors | p50 ms | p99 ms | max ms |",
    "|---|---:|---:|---:|---:|---:|",
    `| saturating tenant | ${result.saturating.requests} | ${result.saturating.errors} | ` +
      `${f(result.saturating.p50)} | | |`,
    `| other tenant | ${result.other.requests} | ${result.other.errors} | ${f(result.other.p50)} | ` +
      `${f(result.other.p99)} | ${f(result.other.max)} |`,
    "",
    `${result.resets} HTTP/2 searches reset after their HEADERS: ${result.runningAtOnce} statements running at ` +
      `MariaDB right after, ${result.runningAfter} ${AFTER_RESETS_MS / 1000} s later.`,
    ...(result.other.firstError === undefined
      ? []
      : ["", `The other tenant's first error: ${result.other.firstError}`]),
  ].join("\n");
}
