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
 * `head` (a connection's first bytes) as a plain GET: exactly one request head and nothing after it, one `Host`,
 * one `Authorization`, a plain query, no header from UNUSUAL; else undefined.
 */
export function plainRequestOf(head: Buffer): PlainRequest | undefined {
  const length = head.length;
  if (length > MAX_HEAD_BYTES || length < 4 || head.indexOf("\r\n\r\n", 0, "latin1") !== length - 4) return undefined;
  const lines = head.toString("latin1", 0, length - 4).split("\r\n");
  const target = REQUEST_LINE.exec(lines[0] as string)?.[1];
  if (target === undefined) return undefined;
  const q = target.indexOf("?");
  if (q !== -1 && !PLAIN_QUERY.test(target.slice(q + 1))) return undefined;
  let authorization: string | undefined;
  let requestId: string | undefined;
  let hosts = 0;
  for (let i = 1; i < lines.length; i++) {
    const header = HEADER_LINE.exec(lines[i] as string);
    if (header === null) return undefined;
    const name = (header[1] as string).toLowerCase();
    if (UNUSUAL.has(name)) return undefined;
    if (name === "host") hosts++;
    else if (name === "authorization") {
      if (authorization !== undefined) return undefined;
      authorization = header[2] as string;
    } else if (name === "x-request-id") requestId ??= header[2];
  }
  if (hosts !== 1 || authorization === undefined) return undefined;
  return { pathname: q === -1 ? target : target.slice(0, q), authorization, requestId };
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

/**
 * The peek's early refusal: answers and closes `socket` when `head` is a plain watch request refused by
 * `limits.refuseEarly`, and says so; false when the request is to be served the usual way.
 */
export function createEarlyWatchRefusal(
  limits: WatchLimits,
  logger: Logger,
): (head: Buffer, socket: Socket) => boolean {
  const encoded = new WeakMap<RegistryError, Encoded>();
  const date = createDate();
  return (head, socket) => {
    const request = plainRequestOf(head);
    if (request === undefined) return false;
    const refusal = limits.refuseEarly(watchKeyOf(request.pathname, request.authorization));
    if (refusal === undefined) return false;
    let answer = encoded.get(refusal);
    if (answer === undefined) {
      answer = encode(refusal);
      encoded.set(refusal, answer);
    }
    refusalsOf(logger).count(refusal, PROCEDURE);
    const id = requestIdOf(request.requestId);
    const start = `${answer.statusLine}x-request-id: ${id}\r\n${answer.headers}Date: ${date()}\r\n\r\n`;
    // Closed once the answer is flushed, as Node closes a `Connection: close` answer's connection.
    socket.end(Buffer.concat([Buffer.from(start, "latin1"), answer.body]), () => socket.destroy());
    return true;
  };
}
