/**
 * `npm run bench -- --large-pages` (issue 25): 40 definitions of about 750 KB
 * in one tenant, then, for each protocol, four list calls at once with
 * `limit` 100, each paging through with nextPageToken. A fresh service process
 * per protocol (production flags: package.json config.nodeFlags), so that its
 * peak RSS (VmHWM, reset once it is ready) is that protocol's alone, and a crash
 * of one does not hide the others. Prints one row per protocol: peak RSS,
 * pages, definitions reached per list, and whether the process survived.
 */
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
} from "../gen/asor/v1/agent_definition_service_pb.js";
import { peakRssKib, resetPeakRss } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";
import { createGrpcClient } from "./rpc-clients.js";

const DEFINITIONS = 40;
const LISTS = 4;

/** About 750 KB of JSON: 75 skills of 10,000 characters (under the 1 MiB body limit). */
function large(i: number): unknown {
  return {
    name: `Large Agent ${i}`,
    description: "Carries a lot.",
    url: "https://agents.example.com/large",
    version: "1.0.0",
    provider: { id: "Provider=Bench" },
    skills: Array.from({ length: 75 }, (_, n) => ({
      id: `s${n}`,
      name: `Skill ${n}`,
      description: String.fromCharCode(97 + (n % 26)).repeat(10_000),
    })),
  };
}

/** A page as every protocol's client reads it. */
type ReadPage = (pageToken: string | undefined) => Promise<{ count: number; next: string | undefined }>;

const PROTOCOLS = ["rest", "connect-json", "connect-binary", "grpc-web", "grpc"] as const;
type Protocol = (typeof PROTOCOLS)[number];

function pageReader(
  protocol: Protocol,
  service: ServerProcess,
  authorization: string,
  tenant: string,
): { read: ReadPage; close(): void } {
  const request = (pageToken: string | undefined) =>
    create(ListAgentDefinitionsRequestSchema, {
      tenant,
      limit: 100,
      ...(pageToken === undefined ? {} : { pageToken }),
    });
  if (protocol === "rest") {
    const read: ReadPage = async (pageToken) => {
      const query = new URLSearchParams({ limit: "100", ...(pageToken === undefined ? {} : { pageToken }) });
      const res = await fetch(`${service.baseUrl}/api/asor/v1/${tenant}/agentDefinition?${query}`, {
        headers: { authorization },
      });
      if (res.status !== 200) throw new Error(`REST list answered ${res.status}`);
      const body = (await res.json()) as { data: unknown[]; nextPageToken?: string };
      return { count: body.data.length, next: body.nextPageToken };
    };
    return { read, close: () => undefined };
  }
  if (protocol === "grpc") {
    const client = createGrpcClient(service.baseUrl, authorization);
    const read: ReadPage = async (pageToken) => {
      const page = (await client.call("listAgentDefinitions", request(pageToken))) as {
        data: unknown[];
        nextPageToken?: string;
      };
      return { count: page.data.length, next: page.nextPageToken };
    };
    return { read, close: () => client.close() };
  }
  const options = { baseUrl: service.baseUrl, httpVersion: "1.1" as const };
  const transport =
    protocol === "grpc-web"
      ? createGrpcWebTransport(options)
      : createConnectTransport({ ...options, useBinaryFormat: protocol === "connect-binary" });
  const client = createClient(AgentDefinitionService, transport);
  const read: ReadPage = async (pageToken) => {
    const page = await client.listAgentDefinitions(request(pageToken), { headers: { authorization } });
    return { count: page.data.length, next: page.nextPageToken };
  };
  return { read, close: () => undefined };
}

/** Posts the large definitions through the service's REST surface. */
export async function seedLargeDefinitions(
  service: ServerProcess,
  authorization: string,
  tenant: string,
  count = DEFINITIONS,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${service.baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify(large(i)),
    });
    if (res.status !== 201)
      throw new Error(`POST of large definition ${i} answered ${res.status}: ${await res.text()}`);
  }
}

export interface LargePagesRow {
  readonly protocol: Protocol;
  readonly peakRssMib: number;
  /** Definitions each list reached by paging; DEFINITIONS each when all is well. */
  readonly reached: readonly number[];
  readonly pages: number;
  /** The failure, if a list failed (the process gone, an error answered). */
  readonly error?: string;
  readonly survived: boolean;
}

/** Runs the four lists over `protocol` against a service started for it by `start`. */
export async function largePagesOver(
  protocol: Protocol,
  start: () => Promise<ServerProcess>,
  authorization: string,
  tenant: string,
): Promise<LargePagesRow> {
  const service = await start();
  const reader = pageReader(protocol, service, authorization, tenant);
  try {
    resetPeakRss(service.pid);
    let pages = 0;
    const pageThrough = async (): Promise<number> => {
      let reached = 0;
      let token: string | undefined;
      do {
        const page = await reader.read(token);
        pages++;
        reached += page.count;
        token = page.next;
      } while (token !== undefined && reached <= DEFINITIONS);
      return reached;
    };
    const settled = await Promise.allSettled(Array.from({ length: LISTS }, pageThrough));
    const peakRssMib = peakRssKib(service.pid) / 1024;
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
    const alive = await fetch(`${service.baseUrl}/healthz`).then(
      (res) => res.status === 200,
      () => false,
    );
    return {
      protocol,
      peakRssMib,
      reached: settled.map((s) => (s.status === "fulfilled" ? s.value : 0)),
      pages,
      ...(failed === undefined ? {} : { error: String(failed.reason).slice(0, 120) }),
      survived: alive,
    };
  } finally {
    reader.close();
    await service.stop();
  }
}

export { PROTOCOLS as LARGE_PAGE_PROTOCOLS };

/** The Markdown table of the rows. */
export function largePagesReport(rows: readonly LargePagesRow[]): string {
  const lines = [
    `${LISTS} lists at once, limit 100, over ${DEFINITIONS} definitions of ~750 KB; one fresh service per protocol`,
    "",
    "| protocol | peak RSS (MiB) | pages | definitions reached per list | service survived | error |",
    "| --- | ---: | ---: | --- | --- | --- |",
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.protocol} | ${row.peakRssMib.toFixed(0)} | ${row.pages} | ${row.reached.join(", ")} ` +
        `| ${row.survived ? "yes" : "**no**"} | ${row.error ?? ""} |`,
    );
  }
  return lines.join("\n");
}
