/**
 * A REST watch over HTTP/1.1 refused from its connection's first bytes (issue 50, scenario 2): when the request is
 * a plain `GET` of a watch path whose path and Authorization header (watchKeyOf) already hold their caller's
 * WATCH_MAX_PER_TOKEN open watches, it is answered with the refusal the watch's operation gave that key, made into
 * bytes once, and its connection closed: no HTTP parser, request, record, access line or error object of its own,
 * counted in the aggregated refusal line and in `asor_watches_refused_early_total`. The operation stays the
 * authority (operations/watch-limits.ts refuseEarly): a request of that key would be refused by it with that very
 * answer, and a request this reader cannot read whole and plainly goes the usual way.
 */
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { RegistryError } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import type { Logger } from "../logger.js";
import { requestIdOf } from "../observability/request-record.js";
import { type WatchLimits, watchKeyOf } from "../operations/watch-limits.js";
import { refusalsOf } from "../surfaces/pipeline/failures.js";

/** The watch's procedure, as the refusal line names it (pipeline.ts procedureOf). */
const PROCEDURE = `${AgentDefinitionService.typeName}/${AgentDefinitionService.method.watchAgentDefinitions.name}`;

/** A head longer than this goes the usual way (Node's parser refuses one past --max-http-header-size). */
const MAX_HEAD_BYTES = 8 * 1024;

/** The request line read here: a GET of an origin-form target, HTTP/1.1. */
const REQUEST_LINE = /^GET (\/[!-~]*) HTTP\/1\.1$/;

/**
 * A header line: a token, a colon, a value of visible ASCII, spaces and tabs (RFC 9110 §5.5 without obs-text, which
 * goes the usual way).
 */
const HEADER_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([ -~\t]*?)[ \t]*$/;

/** The only query a watch refused here may have: `since`, a revision, or none (anything else is decoded first). */
const PLAIN_QUERY = /^(?:since=\d{1,15})?$/;

/**
 * Headers that change how the request is read or answered before its caller's limit is reached (a body, an
 * upgrade, a resume point that is decoded first): with one of them, the request goes the usual way.
 */
const UNUSUAL = new Set(["content-length", "transfer-encoding", "expect", "upgrade", "last-event-id"]);

/** What is read of a plain watch request's head. */
interface PlainRequest {
  readonly pathname: string;
  readonly authorization: string;
  readonly requestId: string | undefined;
}

/**
 * `head` (a connection's first bytes) as a plain GET of a path `isWatchPath` accepts: exactly one request head and
 * nothing after it, one `Host`, one `Authorization`, a plain query, no header from UNUSUAL; else undefined. The
 * request line is read first: any other request costs only that.
 */
export function plainRequestOf(head: Buffer, isWatchPath: (pathname: string) => boolean): PlainRequest | undefined {
  const length = head.length;
  if (length > MAX_HEAD_BYTES || length < 4 || head[0] !== 0x47 /* G */) return undefined;
  const lineEnd = head.indexOf("\r\n", 0, "latin1");
  const target = REQUEST_LINE.exec(head.toString("latin1", 0, lineEnd))?.[1];
  if (target === undefined) return undefined;
  const q = target.indexOf("?");
  const pathname = q === -1 ? target : target.slice(0, q);
  if ((q !== -1 && !PLAIN_QUERY.test(target.slice(q + 1))) || !isWatchPath(pathname)) return undefined;
  if (head.indexOf("\r\n\r\n", 0, "latin1") !== length - 4) return undefined;
  const lines = head.toString("latin1", lineEnd + 2, length - 4).split("\r\n");
  let authorization: string | undefined;
  let requestId: string | undefined;
  let hosts = 0;
  for (let i = 0; i < lines.length; i++) {
    const header = HEADER_LINE.exec(lines[i] as string);
    if (header === null) return undefined;
    const name = (header[1] as string).toLowerCase();
    if (UNUSUAL.has(name)) return undefined;
    if (name === "host") hosts++;
    else if (name === "authorization") {
      if (authorization !== undefined) return undefined;
      authorization = header[2] as string;
    } else if (name === "x-request-id") {
      // A repeated one joined as Node joins it: no longer an id taken as sent, as the usual way finds.
      requestId = requestId === undefined ? header[2] : `${requestId}, ${header[2]}`;
    }
  }
  if (hosts !== 1 || authorization === undefined) return undefined;
  return { pathname, authorization, requestId };
}

/** An answer's status line and headers but its id and date, and its body, made once per refusal. */
interface Encoded {
  readonly statusLine: string;
  readonly headers: string;
  readonly body: Uint8Array;
}

function encode(refusal: RegistryError): Encoded {
  // As REST answers a watch refused for want of a place on HTTP/1.1 (rest/status.ts), written as Node writes it
  // (node-edge.ts: its id first, then the answer's headers, its length, Node's Date).
  const answer = errorAnswer(refusal, { connection: "close" });
  const body = answer.body ?? new Uint8Array();
  const headers = Object.entries({ ...answer.headers, "content-length": String(body.byteLength) })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  return { statusLine: `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n`, headers, body };
}

/** Node's `Date` header's value, made once a second as Node makes it. */
function createDate(): () => string {
  let second = -1;
  let value = "";
  return () => {
    const now = Date.now();
    if (Math.floor(now / 1000) !== second) {
      second = Math.floor(now / 1000);
      value = new Date(now).toUTCString();
    }
    return value;
  };
}

/** What the gate sees of an HTTP/1.1 connection it hands on: the connection the HTTP/1.1 server was given. */
export type Connection = object;

/**
 * The early refusal at the peek (node-server.ts), for the plain watch requests of each key: `admit` refuses a
 * request `limits.refuseEarly` refuses, and otherwise serves it (hands it to the HTTP/1.1 server with `serve`) when
 * it is its key's turn: at most the key's places left (WATCH_MAX_PER_TOKEN less its open watches, at least one) are
 * served at once; the others wait, their first bytes unparsed, until one of those is answered (`answered`), and are
 * then refused or served. A burst of one token's watches thus reaches the operation only as far as its places go,
 * and the rest is refused from its first bytes, instead of each being read, authenticated and refused in full (the
 * burst arrives before the first watch is admitted). A request waits at most `maxWaitMs` (then it is served), and
 * goes on being served the usual way when it is not a plain watch request.
 */
export interface EarlyWatchGate {
  /** Decides for a connection's first bytes (`head`); `serve` hands it on, with what its answer must call. */
  admit(head: Buffer, socket: Socket, serve: (answered?: () => void) => void): void;
  /** The first request of `connection` is answered (or its connection gone): its key's next requests may go. */
  answered(connection: Connection): void;
  /**
   * What `serve` handed on with `connection`: called by `answered`, once, or when the connection closes first
   * (a request its HTTP/1.1 server refused before the edge saw it).
   */
  track(connection: Duplex, answered: () => void): void;
}

/** The requests of one key in flight (served, not yet answered) and those waiting for their turn. */
interface KeyTurns {
  inFlight: number;
  readonly waiting: Waiting[];
  /** For the oldest waiting request's end of wait, while any waits. */
  timer?: NodeJS.Timeout | undefined;
}

interface Waiting {
  readonly socket: Socket;
  readonly requestId: string | undefined;
  readonly serve: (answered?: () => void) => void;
  /** When it stops waiting (performance.now()): then it is served. */
  readonly until: number;
  readonly gone: () => void;
}

export interface EarlyWatchGateOptions {
  readonly limits: WatchLimits;
  readonly logger: Logger;
  /** Whether `pathname` is a REST watch's (a GET of it reaches the watch). */
  readonly isWatchPath: (pathname: string) => boolean;
  /** The longest a request waits for its turn (HTTP_HEADERS_TIMEOUT_MS): then it is served. */
  readonly maxWaitMs: number;
}

export function createEarlyWatchGate({
  limits,
  logger,
  isWatchPath,
  maxWaitMs,
}: EarlyWatchGateOptions): EarlyWatchGate {
  const refuse = createRefuser(logger);
  const turns = new Map<string, KeyTurns>();
  const tracked = new WeakMap<Connection, () => void>();
  const places = (key: string): number => Math.max(1, limits.perToken - limits.openOf(key));

  /** Serves `serve`'s request as one of `key`'s in flight. */
  const go = (key: string, turn: KeyTurns, serve: (answered?: () => void) => void): void => {
    turn.inFlight++;
    let done = false;
    serve(() => {
      if (done) return;
      done = true;
      turn.inFlight--;
      next(key, turn);
    });
  };

  /** After an answer of `key`: its waiting requests refused, or served as far as its places go. */
  const next = (key: string, turn: KeyTurns): void => {
    while (turn.waiting.length > 0) {
      const first = turn.waiting[0] as Waiting;
      const refusal = limits.refuseEarly(key);
      if (refusal === undefined && turn.inFlight >= places(key)) break;
      turn.waiting.shift();
      first.socket.off("close", first.gone);
      if (refusal !== undefined) refuse(first.socket, refusal, first.requestId);
      else go(key, turn, first.serve);
    }
    if (turn.waiting.length === 0 && turn.timer !== undefined) {
      clearTimeout(turn.timer);
      turn.timer = undefined;
    }
    forget(key, turn);
  };
  /** Drops `key`'s turns once nothing of it is in flight or waiting. */
  const forget = (key: string, turn: KeyTurns): void => {
    if (turn.inFlight === 0 && turn.waiting.length === 0 && turns.get(key) === turn) turns.delete(key);
  };

  return {
    admit(head, socket, serve) {
      const request = plainRequestOf(head, isWatchPath);
      if (request === undefined) return serve();
      const key = watchKeyOf(request.pathname, request.authorization);
      const refusal = limits.refuseEarly(key);
      if (refusal !== undefined) return refuse(socket, refusal, request.requestId);
      let turn = turns.get(key);
      if (turn === undefined) {
        turn = { inFlight: 0, waiting: [] };
        turns.set(key, turn);
      }
      if (turn.inFlight < places(key)) return go(key, turn, serve);
      const own = turn;
      wait(own, { socket, requestId: request.requestId, serve }, maxWaitMs, () => forget(key, own));
    },
    answered(connection) {
      const answered = tracked.get(connection);
      if (answered === undefined) return;
      tracked.delete(connection);
      answered();
    },
    track(connection, answered) {
      tracked.set(connection, answered);
      // `answered` counts once (go), whichever comes first.
      connection.once("close", answered);
    },
  };
}

/**
 * Puts a request in `turn`'s queue until its turn (next() takes it) or, after `maxWaitMs`, serves it the usual
 * way; a request whose client leaves meanwhile is dropped. `left` is told when one leaves the queue so. One timer
 * a key, for its oldest request, not one a request (a burst queues hundreds).
 */
function wait(
  turn: KeyTurns,
  request: Pick<Waiting, "socket" | "requestId" | "serve">,
  maxWaitMs: number,
  left: () => void,
): void {
  // Its turn comes with an answer of its key: until then nothing more of it is read.
  request.socket.pause();
  const waiting: Waiting = {
    ...request,
    until: performance.now() + maxWaitMs,
    gone: () => {
      const at = turn.waiting.indexOf(waiting);
      if (at === -1) return;
      turn.waiting.splice(at, 1);
      left();
    },
  };
  request.socket.once("close", waiting.gone);
  turn.waiting.push(waiting);
  if (turn.timer === undefined) expireLater(turn, left);
}

/** Serves, when it comes, the oldest waiting request of `turn` whose wait is over, and any after it. */
function expireLater(turn: KeyTurns, left: () => void): void {
  const first = turn.waiting[0];
  if (first === undefined) return;
  turn.timer = setTimeout(
    () => {
      turn.timer = undefined;
      const now = performance.now();
      while (turn.waiting[0] !== undefined && (turn.waiting[0] as Waiting).until <= now) {
        const over = turn.waiting.shift() as Waiting;
        over.socket.off("close", over.gone);
        over.serve();
      }
      left();
      expireLater(turn, left);
    },
    Math.max(0, first.until - performance.now()),
  );
}

/** Answers `socket` with `refusal` (its bytes made once) and closes it; counts it in the refusal log. */
function createRefuser(
  logger: Logger,
): (socket: Socket, refusal: RegistryError, requestId: string | undefined) => void {
  const encoded = new WeakMap<RegistryError, Encoded>();
  const date = createDate();
  return (socket, refusal, requestId) => {
    let answer = encoded.get(refusal);
    if (answer === undefined) {
      answer = encode(refusal);
      encoded.set(refusal, answer);
    }
    refusalsOf(logger).count(refusal, PROCEDURE);
    const id = requestIdOf(requestId);
    const start = `${answer.statusLine}x-request-id: ${id}\r\n${answer.headers}Date: ${date()}\r\n\r\n`;
    // Closed once the answer is flushed, as Node closes a `Connection: close` answer's connection.
    socket.end(Buffer.concat([Buffer.from(start, "latin1"), answer.body]), () => socket.destroy());
  };
}
