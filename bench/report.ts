/** The run's results as Markdown tables (pasted into BENCHMARKS.md) and as JSON. */
import type { Measurement } from "./measure.js";
import { limitOf } from "./measure.js";
import { KIND_LABELS, KINDS, type Kind, type Scenario, SEARCH_KINDS } from "./scenarios.js";

export interface Row {
  /** The definitions in the tenant when the scenario started. */
  readonly definitions: number;
  /** The round's nominal size (1000, 10000...). */
  readonly size: number;
  readonly scenario: Scenario;
  readonly measurement: Measurement;
}

export interface RunInfo {
  readonly database: string;
  readonly machine: string;
  readonly started: string;
  readonly options: string;
  /** The `total` a list answered at each size. */
  readonly listTotals: ReadonlyMap<number, number>;
  readonly loadBefore: number;
}

const fixed = (value: number, digits = 0): string => (Number.isFinite(value) ? value.toFixed(digits) : "-");
const ms = (value: number): string =>
  !Number.isFinite(value) ? "-" : value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0);
const count = (n: number): string => n.toLocaleString("en-US");
/** CPU of the server, the database server, the load generator and everything else, in % of one core. */
const cpu = (m: Measurement): string =>
  `${fixed(m.serverCpu)} / ${fixed(m.databaseCpu)} / ${fixed(m.clientCpu)} / ${fixed(m.othersCpu)}`;

function table(header: string[], rows: string[][]): string {
  const textColumns = new Set(["scenario", "surface", "limited by"]);
  const align = header.map((h) => (textColumns.has(h) ? "---" : "---:"));
  return [`| ${header.join(" | ")} |`, `|${align.join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

function find(rows: readonly Row[], size: number, id: string): Row | undefined {
  return rows.find((r) => r.size === size && r.scenario.id === id);
}

/** Service (REST) against its floor, per size and scenario. */
function scenarioTable(rows: readonly Row[], sizes: readonly number[]): string {
  const out: string[][] = [];
  for (const size of sizes) {
    for (const kind of [...KINDS, ...SEARCH_KINDS]) {
      const service = find(rows, size, `service rest ${kind}`);
      const floor = find(rows, size, `floor rest ${kind}`);
      if (service === undefined && floor === undefined) continue;
      const s = service?.measurement;
      const f = floor?.measurement;
      out.push([
        count(service?.definitions ?? floor?.definitions ?? size),
        KIND_LABELS[kind],
        fixed(s?.rps ?? Number.NaN),
        ms(s?.p50 ?? Number.NaN),
        ms(s?.p99 ?? Number.NaN),
        s === undefined ? "-" : String(s.errors),
        fixed(f?.rps ?? Number.NaN),
        ms(f?.p50 ?? Number.NaN),
        ms(f?.p99 ?? Number.NaN),
        s !== undefined && f !== undefined ? fixed(s.rps / f.rps, 2) : "-",
        fixed(s?.peakRssMib ?? Number.NaN),
        s === undefined ? "-" : cpu(s),
        f === undefined ? "-" : cpu(f),
        s === undefined ? "-" : limitOf(s),
      ]);
    }
  }
  return table(
    [
      "definitions",
      "scenario",
      "rps",
      "p50 ms",
      "p99 ms",
      "errors",
      "floor rps",
      "floor p50 ms",
      "floor p99 ms",
      "service ÷ floor",
      "peak RSS MiB",
      "CPU % server / db / client / others",
      "floor CPU %",
      "limited by",
    ],
    out,
  );
}

/** REST, Connect and gRPC on the same operations. */
function surfaceTable(rows: readonly Row[], size: number): string {
  const out: string[][] = [];
  for (const kind of KINDS) {
    for (const surface of ["rest", "connect", "grpc"] as const) {
      const row = find(rows, size, `service ${surface} ${kind}`);
      if (
        row === undefined ||
        !rows.some((r) => r.size === size && r.scenario.kind === kind && r.scenario.surface !== "rest")
      )
        continue;
      const m = row.measurement;
      out.push([
        KIND_LABELS[kind],
        {
          rest: "REST (JSON, HTTP/1.1)",
          connect: "Connect (JSON, HTTP/1.1)",
          grpc: "gRPC (binary, HTTP/2, one channel)",
        }[surface],
        fixed(m.rps),
        ms(m.p50),
        ms(m.p99),
        String(m.errors),
        fixed(m.peakRssMib),
        cpu(m),
        limitOf(m),
      ]);
    }
  }
  return table(
    [
      "scenario",
      "surface",
      "rps",
      "p50 ms",
      "p99 ms",
      "errors",
      "peak RSS MiB",
      "CPU % server / db / client / others",
      "limited by",
    ],
    out,
  );
}

/** How each REST scenario changes with the tenant's size. */
function growthTable(rows: readonly Row[], sizes: readonly number[], listTotals: ReadonlyMap<number, number>): string {
  const header = [
    "scenario",
    ...sizes.map((s) => `${count(s)}: rps`),
    ...sizes.map((s) => `${count(s)}: p50 / p99 ms`),
    `rps ${count(sizes[sizes.length - 1]!)} ÷ ${count(sizes[0]!)}`,
  ];
  const out: string[][] = [];
  const kinds: Kind[] = [...KINDS, ...SEARCH_KINDS];
  for (const kind of kinds) {
    const ms_ = sizes.map((size) => find(rows, size, `service rest ${kind}`)?.measurement);
    if (ms_.every((m) => m === undefined)) continue;
    const first = ms_[0];
    const last = ms_[ms_.length - 1];
    out.push([
      KIND_LABELS[kind],
      ...ms_.map((m) => fixed(m?.rps ?? Number.NaN)),
      ...ms_.map((m) => (m === undefined ? "-" : `${ms(m.p50)} / ${ms(m.p99)}`)),
      first !== undefined && last !== undefined ? fixed(last.rps / first.rps, 2) : "-",
    ]);
  }
  out.push([
    "list `total` answered",
    ...sizes.map((s) => (listTotals.has(s) ? count(listTotals.get(s)!) : "-")),
    ...sizes.map(() => ""),
    "",
  ]);
  return table(header, out);
}

export function markdownReport(
  rows: readonly Row[],
  sizes: readonly number[],
  surfacesAt: number,
  info: RunInfo,
): string {
  return [
    `Run ${info.started}: ${info.database}; ${info.machine}; load average before the run ` +
      `${info.loadBefore.toFixed(2)}; ${info.options}.`,
    "",
    "### Service (REST) against its floor",
    "",
    scenarioTable(rows, sizes),
    "",
    `### REST, Connect and gRPC side by side (${count(surfacesAt)} definitions)`,
    "",
    surfaceTable(rows, surfacesAt),
    "",
    "### Growth (REST)",
    "",
    growthTable(rows, sizes, info.listTotals),
    "",
  ].join("\n");
}
