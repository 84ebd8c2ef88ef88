/**
 * The watchers of the watch scenario (bench/watch.ts), in a process of their own (forked with tsx), so
 * that reading their events costs the bench's writer nothing: `count` watchers of one tenant from
 * revision `since`, over REST's Server-Sent Events (one HTTP/1.1 connection each) or gRPC
 * (@grpc/grpc-js, server streams spread over connections of at most 50 streams). Each watcher notes
 * the time each change's revision arrives (performance.timeOrigin + performance.now(): the wall clock
 * in milliseconds, the same clock as the writer's in the parent). The events are not decoded: an SSE
 * event's `id:` line and a gRPC message's first two fields (type, revision) say all that is measured.
 */
import { connect } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  AgentDefinitionService,
  WatchAgentDefinitionsRequestSchema,
} from "../gen/asor/v1/agent_definition_service_pb.js";
import { SseIds } from "./sse-ids.js";

export type WatchProtocol = "sse" | "grpc";

/** What the parent asks. */
export type WatchWorkerRequest =
  | {
      readonly type: "open";
      readonly protocol: WatchProtocol;
      readonly baseUrl: string;
      readonly port: number;
      readonly tenant: string;
      readonly authorization: string;
      readonly count: number;
      /** Every watcher starts after this revision. */
      readonly since: number;
      /** The most changes a watcher is expected to see (the size of its arrival table). */
      readonly capacity: number;
      /** gRPC: the HTTP/2 flow-control window the watchers' connections announce, in bytes (grpc-js: 64 KiB). */
      readonly grpcWindow?: number | undefined;
    }
  | {
      readonly type: "finish";
      /** The writes' revisions (since + 1 on, in order) and the times each write was sent and acknowledged. */
      readonly sent: readonly number[];
      readonly acked: readonly number[];
      /** How long to wait for the last arrivals. */
      readonly waitMs: number;
    };

/** What a run of watchers found, sent back on `finish`. */
export interface WatchWorkerResult {
  readonly watchers: number;
  /** Watchers that got every write's revision exactly once, in order. */
  readonly complete: number;
  /** Changes received in all, and those expected (writes × watchers). */
  readonly received: number;
  readonly expected: number;
  readonly duplicates: number;
  readonly outOfOrder: number;
  /** Watchers whose stream failed or ended early, with the first reason. */
  readonly failed: number;
  readonly firstFailure: string | undefined;
  /** Delivery latency in ms over every (write, watcher): from the write's acknowledgement, and from its send. */
  readonly fromAck: Percentiles;
  readonly fromSend: Percentiles;
}

export interface Percentiles {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

const now = (): number => performance.timeOrigin + performance.now();

interface Watcher {
  /** Arrival time by revision - since - 1; 0 until it arrives. */
  readonly arrivals: Float64Array;
  last: number;
  duplicates: number;
  outOfOrder: number;
  failure: string | undefined;
  close(): void;
}

function newWatcher(capacity: number, since: number, close: () => void): Watcher & { note(rev: number): void } {
  const w = {
    arrivals: new Float64Array(capacity),
    last: since,
    duplicates: 0,
    outOfOrder: 0,
    failure: undefined as string | undefined,
    close,
    note(revision: number) {
      const at = now();
      const index = revision - since - 1;
      if (revision <= w.last) w.outOfOrder++;
      w.last = Math.max(w.last, revision);
      if (index < 0 || index >= capacity) return;
      if (w.arrivals[index] !== 0) w.duplicates++;
      else w.arrivals[index] = at;
    },
  };
  return w;
}

/**
 * Every SSE watcher's reads land in this one buffer (net's `onread`), each scanned before the next read, so no
 * read allocates. Through node:http each read was a Buffer of its own, pushed through the response's stream.
 */
const readBuffer = Buffer.allocUnsafe(1024 * 1024);

const HEAD_END = Buffer.from("\r\n\r\n");

/**
 * Opens an SSE watcher and resolves when its stream has opened (the service's first comment arrived). One
 * HTTP/1.1 connection of its own, the request written by hand and the answer read raw (SseIds): the
 * head's status line checked, the body's chunked coding left in place.
 */
function openSse(request: Extract<WatchWorkerRequest, { type: "open" }>, onOpen: (error?: string) => void): Watcher {
  const url = new URL(`${request.baseUrl}/api/asor/v1/${request.tenant}/agentDefinitionEvents?since=${request.since}`);
  let opened = false;
  const open = (error?: string) => {
    if (opened) return;
    opened = true;
    onOpen(error);
  };
  const w = newWatcher(request.capacity, request.since, () => socket.destroy());
  const ids = new SseIds(
    (revision) => w.note(revision),
    (text) => {
      w.failure ??= text;
    },
  );
  /** The answer's head as it arrives; undefined once read. */
  let head: Buffer | undefined = Buffer.alloc(0);
  const socket = connect({
    host: url.hostname,
    port: Number(url.port),
    onread: {
      buffer: readBuffer,
      callback: (length) => {
        let body = readBuffer.subarray(0, length);
        if (head !== undefined) {
          const bytes = Buffer.concat([head, body]);
          const ends = bytes.indexOf(HEAD_END);
          if (ends === -1) {
            head = bytes;
            return true;
          }
          head = undefined;
          const status = bytes.toString("latin1", 0, bytes.indexOf(13));
          if (!status.startsWith("HTTP/1.1 200 ")) {
            w.failure ??= `${status}: ${bytes.toString("utf8", ends + 4).slice(0, 300)}`;
            open(w.failure);
            socket.destroy();
            return false;
          }
          // From the head's last CRLF: its LF is where an id line at the body's start would begin.
          body = bytes.subarray(ends + 2);
        }
        if (body.length > 0) open();
        ids.feed(body);
        return true;
      },
    },
  });
  socket.on("connect", () => {
    socket.write(
      `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        `Authorization: ${request.authorization}\r\nAccept: text/event-stream\r\n\r\n`,
      "latin1",
    );
  });
  socket.on("error", (error) => {
    w.failure ??= error.message;
    open(error.message);
  });
  socket.on("end", () => {
    w.failure ??= "the stream ended";
  });
  return w;
}

/** The type (field 1) and revision (field 2) of an AgentDefinitionEvent, read off its first bytes. */
function typeAndRevision(bytes: Buffer): { type: number; revision: number } {
  let type = 0;
  let revision = 0;
  let at = 0;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = bytes[at++] as number;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < bytes.length) {
    const key = varint();
    const field = key >>> 3;
    if (field === 1) type = varint();
    else if (field === 2) revision = varint();
    else break;
  }
  return { type, revision };
}

/** Opens `count` gRPC watchers, 50 streams to a connection (the service allows 100 by default). */
function openGrpc(
  request: Extract<WatchWorkerRequest, { type: "open" }>,
  onOpen: (error?: string) => void,
): { watchers: Watcher[]; close(): void } {
  const method = AgentDefinitionService.method.watchAgentDefinitions;
  const path = `/${AgentDefinitionService.typeName}/${method.name}`;
  const message = Buffer.from(
    toBinary(
      WatchAgentDefinitionsRequestSchema,
      create(WatchAgentDefinitionsRequestSchema, { since: BigInt(request.since), bookmark: true }),
    ),
  );
  const clients: grpc.Client[] = [];
  const watchers: Watcher[] = [];
  for (let i = 0; i < request.count; i++) {
    if (i % 50 === 0)
      clients.push(
        new grpc.Client(`127.0.0.1:${request.port}`, grpc.credentials.createInsecure(), {
          // A connection of its own for each client (grpc-js shares one per target otherwise).
          "grpc.use_local_subchannel_pool": 1,
          // The HTTP/2 window (stream and connection) the watchers announce; grpc-js's default is 64 KiB.
          ...(request.grpcWindow === undefined ? {} : { "grpc-node.flow_control_window": request.grpcWindow }),
        }),
      );
    const client = clients.at(-1) as grpc.Client;
    const metadata = new grpc.Metadata();
    metadata.set("authorization", request.authorization);
    const call = client.makeServerStreamRequest<Buffer, { type: number; revision: number }>(
      path,
      () => message,
      typeAndRevision,
      message,
      metadata,
    );
    const w = newWatcher(request.capacity, request.since, () => call.cancel());
    let opened = false;
    const open = (error?: string) => {
      if (opened) return;
      opened = true;
      onOpen(error);
    };
    call.on("metadata", () => open());
    call.on("data", (event: { type: number; revision: number }) => {
      open();
      if (event.type !== 4 /* BOOKMARK */) w.note(event.revision);
    });
    call.on("error", (error: grpc.ServiceError) => {
      if (error.code !== grpc.status.CANCELLED) w.failure ??= `${error.code} ${error.details}`;
      open(error.message);
    });
    call.on("end", () => {
      w.failure ??= "the stream ended";
    });
    watchers.push(w);
  }
  return {
    watchers,
    close() {
      for (const w of watchers) w.close();
      for (const client of clients) client.close();
    },
  };
}

function percentiles(values: Float64Array): Percentiles {
  // -1 when nothing arrived (NaN does not survive the parent's IPC, which is JSON).
  if (values.length === 0) return { p50: -1, p99: -1, max: -1 };
  values.sort();
  const at = (q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))] as number;
  return { p50: at(0.5), p99: at(0.99), max: values[values.length - 1] as number };
}

let watchers: Watcher[] = [];
let closeAll = (): void => {};

// Said once the process has started (tsx has compiled it), so that a bench can start measuring after that.
process.send?.({ type: "ready" });

process.on("message", (message: WatchWorkerRequest) => {
  if (message.type === "open") {
    let pending = message.count;
    let errors = 0;
    let firstError: string | undefined;
    const onOpen = (error?: string) => {
      if (error !== undefined) {
        errors++;
        firstError ??= error;
      }
      if (--pending === 0) process.send?.({ type: "opened", errors, firstError });
    };
    if (message.protocol === "sse") {
      watchers = Array.from({ length: message.count }, () => openSse(message, onOpen));
      closeAll = () => {
        for (const w of watchers) w.close();
      };
    } else ({ watchers, close: closeAll } = openGrpc(message, onOpen));
    return;
  }
  void finish(message).then((result) => process.send?.({ type: "result", result }));
});

async function finish(message: Extract<WatchWorkerRequest, { type: "finish" }>): Promise<WatchWorkerResult> {
  const writes = message.sent.length;
  const deadline = Date.now() + message.waitMs;
  const arrived = (w: Watcher) => {
    for (let i = 0; i < writes; i++) if (w.arrivals[i] === 0) return false;
    return true;
  };
  while (Date.now() < deadline && !watchers.every((w) => w.failure !== undefined || arrived(w)))
    await new Promise((resolve) => setTimeout(resolve, 100));
  let received = 0;
  let complete = 0;
  let duplicates = 0;
  let outOfOrder = 0;
  let failed = 0;
  let firstFailure: string | undefined;
  const fromAck = new Float64Array(writes * watchers.length);
  const fromSend = new Float64Array(writes * watchers.length);
  let n = 0;
  for (const w of watchers) {
    let got = 0;
    for (let i = 0; i < writes; i++) {
      const at = w.arrivals[i] as number;
      if (at === 0) continue;
      got++;
      fromAck[n] = at - (message.acked[i] as number);
      fromSend[n] = at - (message.sent[i] as number);
      n++;
    }
    received += got;
    duplicates += w.duplicates;
    outOfOrder += w.outOfOrder;
    if (got === writes && w.duplicates === 0 && w.outOfOrder === 0) complete++;
    if (w.failure !== undefined && got < writes) {
      failed++;
      firstFailure ??= w.failure;
    }
  }
  closeAll();
  return {
    watchers: watchers.length,
    complete,
    received,
    expected: writes * watchers.length,
    duplicates,
    outOfOrder,
    failed,
    firstFailure,
    fromAck: percentiles(fromAck.subarray(0, n)),
    fromSend: percentiles(fromSend.subarray(0, n)),
  };
}
