/**
 * A watch's events on the wire (issue 20): as AgentDefinitionEvent messages for the RPCs, and as
 * Server-Sent Events for REST (`id:` the revision, `event:` the type, `data:` JSON with the type, the
 * revision and the definition as GET answers it).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Compression, encodeEnvelope, envelopeCompress } from "@connectrpc/connect/protocol";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import {
  type AgentDefinitionEvent,
  AgentDefinitionEvent_EventType,
  AgentDefinitionEventSchema,
} from "../../../gen/asor/v1/agent_definition_service_pb.js";
import { errorBody, type RegistryError } from "../../domain/errors.js";
import type { StoredDefinition } from "../../domain/records.js";
import type { WatchEvent } from "../../domain/watch.js";
import { concatBytes } from "./bytes.js";
import { definitionWithMeta, jsonWithMeta, metaMessage } from "./definition-meta.js";

/**
 * What each change's event was made into, made once for all the watchers it goes to (a thousand watchers
 * of a tenant get the same change): by its definition as read, with the revision it was made for (a
 * definition read once is the same object in every watcher's event of that change).
 */
interface Made {
  readonly revision: number;
  sse?: Uint8Array;
  binary?: AgentDefinitionEvent;
  json?: AgentDefinitionEvent;
  /** The binary message in a gRPC envelope, plain and by compression (the gRPC watch, grpc/stream.ts). */
  grpc?: Uint8Array;
  compressed?: Map<string, Promise<Uint8Array>>;
}
const made = new WeakMap<StoredDefinition, Made>();

function madeFor(event: WatchEvent & { stored: StoredDefinition }): Made {
  let entry = made.get(event.stored);
  if (entry === undefined || entry.revision !== event.revision) {
    entry = { revision: event.revision };
    made.set(event.stored, entry);
  }
  return entry;
}

/**
 * The event as a message: a binary caller's definition is its stored bytes as they are (definitionWithMeta);
 * a JSON caller's is decoded, so protobuf JSON writes it. A change's message is made once for all its
 * watchers (they only read it).
 */
export function eventMessage(event: WatchEvent, binary: boolean): AgentDefinitionEvent {
  if (event.stored === undefined) return newEventMessage(event, binary);
  const entry = madeFor(event);
  if (binary) return (entry.binary ??= newEventMessage(event, true));
  return (entry.json ??= newEventMessage(event, false));
}

function newEventMessage(event: WatchEvent, binary: boolean): AgentDefinitionEvent {
  const { stored } = event;
  const definition =
    stored === undefined
      ? undefined
      : binary
        ? definitionWithMeta(stored)
        : { ...fromBinary(AgentDefinitionSchema, stored.binary), meta: metaMessage(stored) };
  return create(AgentDefinitionEventSchema, {
    type: AgentDefinitionEvent_EventType[event.type],
    revision: BigInt(event.revision),
    ...(definition === undefined ? {} : { definition }),
  });
}

const encoder = new TextEncoder();

/**
 * One SSE event: `id:` and `event:` lines, then `data:` with `{"type","revision","definition"}`: the
 * definition's stored JSON with its `meta`, byte for byte what GET answers (none in a BOOKMARK).
 */
export function sseEvent(event: WatchEvent): Uint8Array {
  if (event.stored === undefined) return newSseEvent(event);
  const entry = madeFor(event);
  return (entry.sse ??= newSseEvent(event));
}

/** The last batch of a first event: its events, and their bytes in one array once a second watcher had them. */
interface Joined {
  readonly events: readonly WatchEvent[];
  chunks?: readonly Uint8Array[];
}

/**
 * The last batch joined into one array, by its first event, for SSE and for plain gRPC: the watchers of a tenant
 * are handed the same records by the same read (storage/change-reader.ts), each change as one event object shared
 * by all (service/watch-service.ts), so their batches hold the same events, and one array serves them all. Each
 * of a batch's events was a write of its own to each watcher's socket or stream (40 writes a watcher in a 200 ms
 * poll at 200 changes a second), and a stream behind held each as a buffered write.
 */
const joinedSse = new WeakMap<WatchEvent, Joined>();
const joinedGrpc = new WeakMap<WatchEvent, Joined>();

/**
 * The most events a batch is joined for: a poll's worth at hundreds of changes a second, and the change reader's
 * default handedAtOnce (storage/change-reader.ts), so every batch it hands by default can be joined.
 */
const JOINED_AT_MOST = 64;

/**
 * A batch's bytes: joined into one array once a second watcher is handed the same event objects, the same array
 * for every watcher after; as each event's shared bytes for the first, for a batch no other watcher has had (a
 * filter passes some of the events, a watcher behind gets its own), and when longer than JOINED_AT_MOST. A copy
 * made for a batch of one watcher's own would be that watcher's own too: up to 64 events' bytes (150 KB at 2.3 KB
 * an event) for each watcher behind.
 */
function joinedOnce(
  cache: WeakMap<WatchEvent, Joined>,
  events: readonly WatchEvent[],
  bytesOf: (event: WatchEvent) => Uint8Array,
): readonly Uint8Array[] {
  const first = events[0];
  if (first === undefined || events.length === 1 || events.length > JOINED_AT_MOST) return events.map(bytesOf);
  const known = cache.get(first);
  if (known === undefined || known.events.length !== events.length || !known.events.every((e, i) => e === events[i])) {
    cache.set(first, { events });
    return events.map(bytesOf);
  }
  known.chunks ??= [concatBytes(events.map(bytesOf))];
  return known.chunks;
}

/** A batch of events as SSE (joinedOnce). */
export function sseBatch(events: readonly WatchEvent[]): readonly Uint8Array[] {
  return joinedOnce(joinedSse, events, sseEvent);
}

function newSseEvent(event: WatchEvent): Uint8Array {
  const head =
    `id: ${event.revision}\nevent: ${event.type}\n` + `data: {"type":"${event.type}","revision":${event.revision}`;
  if (event.stored === undefined) return encoder.encode(`${head}}\n\n`);
  // The stored JSON is one line: protobuf JSON written without indentation has no newline outside strings,
  // and a newline inside a string is written as \n.
  const definition = jsonWithMeta(event.stored);
  const start = encoder.encode(`${head},"definition":`);
  const end = encoder.encode("}\n\n");
  const bytes = new Uint8Array(start.byteLength + definition.byteLength + end.byteLength);
  bytes.set(start, 0);
  bytes.set(definition, start.byteLength);
  bytes.set(end, start.byteLength + definition.byteLength);
  return bytes;
}

/** One event as a gRPC message in its envelope, uncompressed: made once for all the watchers of its change. */
function grpcEvent(event: WatchEvent): Uint8Array {
  if (event.stored === undefined) return newGrpcEvent(event);
  const entry = madeFor(event);
  return (entry.grpc ??= newGrpcEvent(event));
}

function newGrpcEvent(event: WatchEvent): Uint8Array {
  return encodeEnvelope(0, toBinary(AgentDefinitionEventSchema, eventMessage(event, true)));
}

/** One event's envelope with `compression` (when it is at least `minBytes`), made once for all watchers. */
function compressedGrpcEvent(event: WatchEvent, compression: Compression, minBytes: number): Promise<Uint8Array> {
  const make = async (): Promise<Uint8Array> => {
    const data = toBinary(AgentDefinitionEventSchema, eventMessage(event, true));
    const envelope = await envelopeCompress({ flags: 0, data }, compression, minBytes);
    return encodeEnvelope(envelope.flags, envelope.data);
  };
  if (event.stored === undefined) return make();
  const entry = madeFor(event);
  entry.compressed ??= new Map();
  let bytes = entry.compressed.get(compression.name);
  if (bytes === undefined) entry.compressed.set(compression.name, (bytes = make()));
  return bytes;
}

/**
 * A batch of events as gRPC messages (AgentDefinitionEvent, binary), one envelope each, to be written at once
 * (corked: one writev). Each change's envelope is made once for all its watchers, compressed or not; a batch
 * is not joined into one buffer, so watchers at different points (with different batches) share the
 * envelopes instead of each holding a copy of theirs.
 */
export async function grpcEvents(
  batch: readonly WatchEvent[],
  compression: Compression | null,
  minBytes: number,
): Promise<readonly Uint8Array[]> {
  if (compression === null) return joinedOnce(joinedGrpc, batch, grpcEvent);
  return Promise.all(batch.map((event) => compressedGrpcEvent(event, compression, minBytes)));
}

/** The SSE event that ends a stream that failed after it began: `event: error`, data the error's body. */
export function sseError(error: RegistryError): Uint8Array {
  return encoder.encode(`event: error\ndata: ${JSON.stringify(errorBody(error))}\n\n`);
}

/** A comment line: sent first, so a client (and any proxy) sees the stream open at once. */
export const SSE_OPEN = encoder.encode(": watching\n\n");
