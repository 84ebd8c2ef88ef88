import { create, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { Health, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";

/** What the health service reports on. */
export interface HealthOptions {
  /** The services whose health is reported; each is healthy while the database answers. */
  readonly services: readonly DescService[];
  /** Resolves while the database answers; throws while it does not. */
  readonly ping: () => Promise<void>;
  /** How often a Watch looks again, in milliseconds. */
  readonly watchIntervalMillis?: number;
}

/**
 * Watch looks once a second: a changed status reaches a client-side health
 * checker within about a second, for one `SELECT 1` per second per watcher.
 */
const defaultWatchIntervalMillis = 1_000;

/**
 * gRPC health checking (`grpc.health.v1.Health`): the server as a whole (the
 * service name "") and each registry service are SERVING while the database
 * answers, NOT_SERVING while it does not. Every answer asks the database
 * afresh, so a load balancer never sees a stale status.
 */
export function createHealthRoutes({ services, ping, watchIntervalMillis = defaultWatchIntervalMillis }: HealthOptions): (router: ConnectRouter) => void {
  const names = ["", ...services.map((s) => s.typeName)];
  const status = (): Promise<Status> =>
    ping().then(
      () => Status.SERVING,
      () => Status.NOT_SERVING,
    );
  const response = (s: Status) => create(HealthCheckResponseSchema, { status: s });

  return (router: ConnectRouter): void => {
    router.service(Health, {
      async check({ service }) {
        if (!names.includes(service)) throw new ConnectError(`unknown service "${service}"`, Code.NotFound);
        return response(await status());
      },
      async *watch({ service }, { signal }) {
        if (!names.includes(service)) {
          // The protocol keeps the call open for a service that may appear later; ours never do.
          yield response(Status.SERVICE_UNKNOWN);
          await delay(Number.POSITIVE_INFINITY, signal);
          return;
        }
        let last: Status | undefined;
        while (!signal.aborted) {
          const now = await status();
          if (now !== last) yield response(now);
          last = now;
          await delay(watchIntervalMillis, signal);
        }
      },
      async list() {
        const now = await status();
        return { statuses: Object.fromEntries(names.map((name) => [name, response(now)])) };
      },
    });
  };
}

/** Resolves after `millis`, or as soon as `signal` aborts. */
function delay(millis: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = Number.isFinite(millis) ? setTimeout(done, millis) : undefined;
    signal.addEventListener("abort", done);
  });
}
