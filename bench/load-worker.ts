/**
 * The load generator, a process of its own (forked by the orchestrator with
 * an IPC channel): it runs one LoadJob at a time and answers its LoadResult.
 * REST (and the floor) is loaded with autocannon; gRPC and Connect with a
 * closed loop of `connections` concurrent callers. Every loop is bounded in
 * time, and only talks to the loopback address it is given.
 */
import { clone, create, fromJson, type JsonObject, type Message } from "@bufbuild/protobuf";
import autocannon from "autocannon";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import {
  GetAgentCardRequestSchema,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../gen/asor/v1/agent_definition_service_pb.js";
import { benchBody, benchBodyTemplate, benchDefinition, benchOverview } from "./definition.js";
import type { LoadJob, LoadResult } from "./load-job.js";
import { percentile } from "./percentile.js";
import { createConnectClient, createGrpcClient, type RpcClient, type UnaryCall } from "./rpc-clients.js";

const template = benchBodyTemplate();

/** Takes items of a list in turn, forever. */
function rotation<T>(items: readonly T[]): () => T {
  if (items.length === 0) throw new Error("a scenario needs at least one id or name to cycle through");
  let next = 0;
  return () => items[next++ % items.length]!;
}

/** The name of each new definition a create job makes. */
function nameMaker(job: LoadJob, phase: string): () => string {
  let n = 0;
  return () => `${job.createPrefix} ${phase} ${n++}`;
}

/** The edition of each update a job sends (benchOverview): new on every request. */
function editionMaker(phase: string): () => string {
  let n = 0;
  return () => `${phase}${n++}`;
}

// ---- REST (and the floor): autocannon ----

function restRequest(job: LoadJob, phase: string): autocannon.Request {
  const headers = { authorization: job.authorization, "content-type": "application/json" };
  switch (job.operation) {
    case "get": {
      const id = rotation(job.ids);
      return {
        method: "GET",
        path: job.restPath,
        headers,
        setupRequest: (req) => ({ ...req, path: `${job.restPath}/${id()}` }),
      };
    }
    case "card": {
      const id = rotation(job.ids);
      return {
        method: "GET",
        path: job.restPath,
        headers,
        setupRequest: (req) => ({ ...req, path: `${job.restPath}/${id()}/agentCard` }),
      };
    }
    case "list":
      return {
        method: "GET",
        path: `${job.restPath}?limit=${job.limit}&${job.query ?? `offset=${job.offset}`}`,
        headers,
      };
    case "create": {
      const name = nameMaker(job, phase);
      return {
        method: "POST",
        path: job.restPath,
        headers,
        setupRequest: (req) => ({ ...req, body: benchBody(template, name()) }),
      };
    }
    case "update": {
      const name = rotation(job.updateNames);
      const edition = editionMaker(phase);
      return {
        method: "POST",
        path: job.restPath,
        headers,
        setupRequest: (req) => ({ ...req, body: benchBody(template, name(), edition()) }),
      };
    }
  }
}

async function restRun(job: LoadJob, seconds: number, phase: string): Promise<LoadResult> {
  let firstError: string | undefined;
  let done!: (result: autocannon.Result) => void;
  let failed!: (error: Error) => void;
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    done = resolve;
    failed = reject;
  });
  const instance = autocannon(
    {
      url: job.baseUrl,
      connections: job.connections,
      duration: seconds,
      timeout: 10,
      requests: [restRequest(job, phase)],
    },
    (error, result) => (error ? failed(error) : done(result)),
  );
  // Our own record of each latency: autocannon's histogram keeps whole milliseconds only.
  const latencies: number[] = [];
  instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode <= 299) latencies.push(responseTime);
    else firstError ??= `HTTP ${statusCode}`;
  });
  instance.on("reqError", (error) => {
    firstError ??= String(error);
  });
  const result = await finished;
  const ok = result["2xx"];
  const errors = result.errors + result.timeouts + result.non2xx;
  return {
    requests: result.requests.total,
    seconds: result.duration,
    rps: ok / result.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
    ...(firstError === undefined ? {} : { firstError }),
  };
}

// ---- gRPC and Connect: a closed loop ----

function rpcRequest(job: LoadJob, phase: string): () => [Parameters<UnaryCall>[0], Message] {
  switch (job.operation) {
    case "get": {
      const id = rotation(job.ids);
      return () => ["getAgentDefinition", create(GetAgentDefinitionRequestSchema, { tenant: job.tenant, id: id() })];
    }
    case "card": {
      const id = rotation(job.ids);
      return () => ["getAgentCard", create(GetAgentCardRequestSchema, { tenant: job.tenant, id: id() })];
    }
    case "list": {
      const request = create(ListAgentDefinitionsRequestSchema, {
        tenant: job.tenant,
        limit: job.limit,
        offset: job.offset,
      });
      return () => ["listAgentDefinitions", request];
    }
    case "create":
    case "update": {
      const name = job.operation === "create" ? nameMaker(job, phase) : rotation(job.updateNames);
      const edition = job.operation === "update" ? editionMaker(phase) : undefined;
      const base = fromJson(AgentDefinitionSchema, benchDefinition("") as JsonObject);
      return () => {
        // A copy per call: a client may serialise a request after it returns.
        const definition = clone(AgentDefinitionSchema, base);
        definition.name = name();
        if (edition !== undefined) definition.overview = benchOverview(edition());
        return [
          "upsertAgentDefinition",
          create(UpsertAgentDefinitionRequestSchema, { tenant: job.tenant, agentCardAndTools: definition }),
        ];
      };
    }
  }
}

async function rpcRun(client: RpcClient, job: LoadJob, seconds: number, phase: string): Promise<LoadResult> {
  const next = rpcRequest(job, phase);
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const started = performance.now();
  const end = started + seconds * 1000;
  const caller = async (): Promise<void> => {
    while (performance.now() < end) {
      const [method, request] = next();
      const t0 = performance.now();
      try {
        await client.call(method, request);
        latencies.push(performance.now() - t0);
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: job.connections }, caller));
  const elapsed = (performance.now() - started) / 1000;
  return {
    requests: latencies.length + errors,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
    ...(firstError === undefined ? {} : { firstError }),
  };
}

// ---- the job loop ----

async function runJob(job: LoadJob): Promise<LoadResult> {
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(job.baseUrl))
    throw new Error(`load goes to loopback only, not ${job.baseUrl}`);
  if (job.surface === "rest") {
    if (job.warmupSeconds > 0) await restRun(job, job.warmupSeconds, "warmup");
    process.send?.({ type: "measuring" });
    return restRun(job, job.durationSeconds, "measured");
  }
  const client =
    job.surface === "grpc"
      ? createGrpcClient(job.baseUrl, job.authorization)
      : createConnectClient(job.baseUrl, job.authorization, job.connections);
  try {
    if (job.warmupSeconds > 0) await rpcRun(client, job, job.warmupSeconds, "warmup");
    process.send?.({ type: "measuring" });
    return await rpcRun(client, job, job.durationSeconds, "measured");
  } finally {
    client.close();
  }
}

process.on("message", (message: { type: string; job: LoadJob }) => {
  if (message.type !== "run") return;
  runJob(message.job).then(
    (result) => process.send?.({ type: "result", result }),
    (error: unknown) =>
      process.send?.({ type: "error", error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
// The orchestrator disconnects when it is done; nothing else keeps this process alive.
process.on("disconnect", () => process.exit(0));
