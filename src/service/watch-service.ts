/**
 * The watch (issue 20): a tenant's changes from a revision on, filtered as the list filters, as events.
 * The process's one change reader (storage/change-reader.ts) reads the log; this decides which of its
 * records a watcher gets and what each event says.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { invalid, issueAt, tenantNotFound } from "../domain/errors.js";
import {
  filterValuesOf,
  passesWatchFilter,
  type WatchEvent,
  type WatchFilterParts,
  watchFilterOf,
} from "../domain/watch.js";
import type { ChangeRecord } from "../storage/change-log.js";
import type { ChangeReader, WatchItem } from "../storage/change-reader.js";
import type { AgentDefinitionRepository } from "../storage/repository.js";

/** What a watch asks (WatchAgentDefinitionsRequest's members, by their TS names). */
export interface WatchRequest extends WatchFilterParts {
  readonly since?: bigint | undefined;
  readonly bookmark?: boolean | undefined;
}

export interface WatchService {
  /**
   * The tenant's events after `since` (else from now): TENANT_NOT_FOUND, REVISION_COMPACTED or a bad
   * `since` are thrown before the first event; WATCH_TOO_SLOW ends the events. They come in batches (the
   * change reader's: what was ready at once), in order.
   */
  watch(tenant: string, request: WatchRequest, signal?: AbortSignal): Promise<AsyncIterable<readonly WatchEvent[]>>;
}

/** The filter values of each record's definition, worked out once however many watchers look at it. */
const valuesCache = new WeakMap<ChangeRecord, ReturnType<typeof filterValuesOf>>();
function valuesOf(record: ChangeRecord): ReturnType<typeof filterValuesOf> {
  let values = valuesCache.get(record);
  if (values === undefined) {
    values = filterValuesOf(fromBinary(AgentDefinitionSchema, record.stored.binary));
    valuesCache.set(record, values);
  }
  return values;
}

/**
 * Each change's event, made once for all the watchers handed its item: the change reader hands one item of a
 * record to every watcher of the tenant, so a thousand watchers share one event object, and what is made of it
 * for the wire (surfaces/encoding/watch-events.ts) is found by it. An event a watcher's batch made of its own was
 * 70 KB a write at 1,000 watchers, the most any step of the fan-out allocated (an allocation profile).
 */
const eventsMade = new WeakMap<WatchItem, WatchEvent>();
function eventOf(item: WatchItem): WatchEvent {
  if (item.type === "bookmark") return { type: "BOOKMARK", revision: item.revision };
  let event = eventsMade.get(item);
  if (event === undefined) {
    event = { type: item.kind, revision: item.revision, stored: item.stored };
    eventsMade.set(item, event);
  }
  return event;
}

export function createWatchService(repository: AgentDefinitionRepository, reader: ChangeReader): WatchService {
  return {
    async watch(tenant, request, signal) {
      if (request.since !== undefined && (request.since < 0n || request.since > BigInt(Number.MAX_SAFE_INTEGER)))
        throw invalid([
          issueAt("since", "OUT_OF_RANGE", `since must be a revision (0 or more), not ${request.since}.`),
        ]);
      if ((await repository.getTenant(tenant)) === undefined) throw tenantNotFound(tenant);
      const filter = watchFilterOf(request);
      const since = request.since === undefined ? undefined : Number(request.since);
      const items = await reader.watch({
        tenant,
        since,
        bookmark: request.bookmark === true,
        signal,
        accept: (record) => passesWatchFilter(filter, record.kind, record.stored, () => valuesOf(record)),
      });
      return (async function* events(): AsyncGenerator<readonly WatchEvent[]> {
        for await (const batch of items) yield batch.map(eventOf);
      })();
    },
  };
}
