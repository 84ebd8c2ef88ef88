import { create, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
} from "../../../gen/grpc/health/v1/health_pb.js";
import { connectionKey } from "./connection.js";

/** What the health service reports on. */
export interface HealthOptions {
  /** The services whose health is reported; each is healthy while the database answers. */
  readonly services: readonly DescService[];
  /** Resolves while the database answers; throws while it does not. */
  readonly ping: () => Promise<void>;
  /** How often the watches' shared probe looks again, in milliseconds. */
  readonly watchIntervalMs?: number;
  /** How many Watch streams may be open at once; one more is refused with RESOURCE_EXHAUSTED. */
  readonly maxWatches: number;
  /**
   * How many of them one connection may have open (its runtime adapter names the connection,
   * `connectionKey`), so one client cannot take every watch; one more is refused the same way.
   */
  readonly maxWatchesPerConnection: number;
}

/**
 * The watches' probe looks once a second: a changed status reaches a
 * client-side health checker within about a second, for one `SELECT 1` per
 * second however many watch.
 */
const defaultWatchIntervalMs = 1_000;

/**
 * gRPC health checking (`grpc.health.v1.Health`): the server as a whole (the
 * service name "") and each registry service are SERVING while the database
 * answers, NOT_SERVING while it does not. Check and List ask the database
 * afresh, so a load balancer never sees a stale status. Watches need no token,
 * so they must cost next to nothing: all of them share one probe, which runs
 * while any is open, at most `maxWatches` are open at once, and at most
 * `maxWatchesPerConnection` on one connection.
 */
export function createHealthRoutes({
  services,
  ping,
  watchIntervalMs = defaultWatchIntervalMs,
  maxWatches,
  maxWatchesPerConnection,
}: HealthOptions): (router: ConnectRouter) => void {
  const names = ["", ...services.map((s) => s.typeName)];
  const status = (): Promise<Status> =>
    ping().then(
      () => Status.SERVING,
      () => Status.NOT_SERVING,
    );
  const response = (s: Status) => create(HealthCheckResponseSchema, { status: s });
  const probe = createSharedProbe(status, watchIntervalMs);
  const seats = new WatchSeats(maxWatches, maxWatchesPerConnection);

  return (router: ConnectRouter): void => {
    router.service(Health, {
      async check({ service }) {
        if (!names.includes(service)) throw new ConnectError(`unknown service "${service}"`, Code.NotFound);
        return response(await status());
      },
      async *watch({ service }, { signal, values }) {
        // Counted out once, when the client leaves or the call ends: Connect may leave a generator
        // whose client left suspended at its `yield`, never to run its `finally`.
        const vacate = seats.take(values.get(connectionKey));
        let leave: (() => void) | undefined;
        let counted = true;
        const release = (): void => {
          if (!counted) return;
          counted = false;
          vacate();
          leave?.();
          signal.removeEventListener("abort", release);
        };
        signal.addEventListener("abort", release);
        try {
          if (!names.includes(service)) {
            // The protocol keeps the call open for a service that may appear later; ours never do.
            yield response(Status.SERVICE_UNKNOWN);
            await delay(Number.POSITIVE_INFINITY, signal);
            return;
          }
          leave = probe.join();
          for (let last: Status | undefined; !signal.aborted; ) {
            const now = await probe.changeFrom(last, signal);
            if (now === undefined) return; // the client left
            yield response(now);
            last = now;
          }
        } finally {
          release();
        }
      },
      async list() {
        const now = await status();
        return { statuses: Object.fromEntries(names.map((name) => [name, response(now)])) };
      },
    });
  };
}

/** The places of health watches: at most `max` open at once, at most `perConnection` on one connection. */
class WatchSeats {
  #open = 0;
  /** Watches open per connection; a connection without one has no entry. */
  readonly #byConnection = new WeakMap<object, number>();
  constructor(
    private readonly max: number,
    private readonly perConnection: number,
  ) {}

  /** Takes a place for a watch on `connection`, or throws RESOURCE_EXHAUSTED; returns what gives it back. */
  take(connection: object | undefined): () => void {
    if (this.#open >= this.max)
      throw new ConnectError(
        `at most ${this.max} health watches may be open at once; use Check, or watch again later`,
        Code.ResourceExhausted,
      );
    const onConnection = connection === undefined ? 0 : (this.#byConnection.get(connection) ?? 0);
    if (onConnection >= this.perConnection) {
      throw new ConnectError(
        `at most ${this.perConnection} health watches may be open on one connection; use Check, or watch ` +
          `again later`,
        Code.ResourceExhausted,
      );
    }
    this.#open++;
    if (connection !== undefined) this.#byConnection.set(connection, onConnection + 1);
    return () => {
      this.#open--;
      if (connection === undefined) return;
      const left = (this.#byConnection.get(connection) ?? 1) - 1;
      if (left > 0) this.#byConnection.set(connection, left);
      else this.#byConnection.delete(connection);
    };
  }
}

/** One probe of the database shared by every watch: runs every `intervalMs` while any watch has joined. */
interface SharedProbe {
  /** Counts a watch in (the first starts the probe) and returns the function that counts it out. */
  join(): () => void;
  /** The status once it is known and differs from `last`, or undefined once `signal` aborts. */
  changeFrom(last: Status | undefined, signal: AbortSignal): Promise<Status | undefined>;
}

function createSharedProbe(status: () => Promise<Status>, intervalMs: number): SharedProbe {
  let watchers = 0;
  /** The last probe's result; undefined while no probe has answered since the watches last came back from none. */
  let current: Status | undefined;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  const waiting = new Set<{ last: Status | undefined; resolve: (s: Status) => void }>();

  const look = async (): Promise<void> => {
    timer = undefined;
    probing = true;
    const now = await status();
    probing = false;
    if (watchers === 0) return;
    current = now;
    for (const waiter of waiting) {
      if (waiter.last === now) continue;
      waiting.delete(waiter);
      waiter.resolve(now);
    }
    timer = setTimeout(() => void look(), intervalMs);
    // A watch in progress never keeps the process from exiting.
    timer.unref();
  };

  return {
    join() {
      watchers++;
      if (watchers === 1 && !probing && timer === undefined) void look();
      let left = false;
      return () => {
        if (left) return;
        left = true;
        watchers--;
        if (watchers > 0) return;
        clearTimeout(timer);
        timer = undefined;
        // Nobody watches: the next watch waits for a fresh probe rather than take this one's result.
        current = undefined;
      };
    },
    changeFrom(last, signal) {
      if (current !== undefined && current !== last) return Promise.resolve(current);
      return new Promise((resolve) => {
        if (signal.aborted) return resolve(undefined);
        const waiter = {
          last,
          resolve: (s: Status) => {
            signal.removeEventListener("abort", abort);
            resolve(s);
          },
        };
        const abort = (): void => {
          waiting.delete(waiter);
          resolve(undefined);
        };
        waiting.add(waiter);
        signal.addEventListener("abort", abort, { once: true });
      });
    },
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
