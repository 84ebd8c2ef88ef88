/** What the orchestrator asks the load generator to do, and what it answers. */

/** How the load reaches the server. `rest` is also how the floor is loaded. */
export type Surface = "rest" | "connect" | "grpc";

/** The registry operations the scenarios drive. */
export type Operation = "create" | "update" | "get" | "card" | "list";

export interface LoadJob {
  readonly surface: Surface;
  readonly operation: Operation;
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  /** For `rest`: the collection path, e.g. `/api/asor/v1/bench/agentDefinition`. */
  readonly restPath: string;
  /** `Bearer <token>`: one token for every request, so its verification is part of what is measured. */
  readonly authorization: string;
  readonly tenant: string;
  /**
   * Requests in flight at once: HTTP/1.1 connections (REST, Connect) or concurrent calls on one HTTP/2
   * channel (gRPC).
   */
  readonly connections: number;
  /** Load before the measurement, discarded. */
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
  /** `get`, `card`: the ids to read, in turn. */
  readonly ids: readonly string[];
  /** `update`: names of existing definitions (bench provider and version), in turn. */
  readonly updateNames: readonly string[];
  /** `create`: new names are `<createPrefix> <n>`; unique per job. */
  readonly createPrefix: string;
  /** `list`: the page. */
  readonly limit: number;
  readonly offset: number;
  /** `list` over REST: more query parameters (filters, `pageToken`), sent instead of `offset`. */
  readonly query?: string;
}

export interface LoadResult {
  /** Completed requests in the measured window (any status). */
  readonly requests: number;
  readonly seconds: number;
  /** Successful requests per second. */
  readonly rps: number;
  /** Latency percentiles, milliseconds. */
  readonly p50: number;
  readonly p99: number;
  /** Failed requests: transport errors, timeouts, non-2xx answers, RPC errors. */
  readonly errors: number;
  /** The first failure, for the log. */
  readonly firstError?: string;
}
