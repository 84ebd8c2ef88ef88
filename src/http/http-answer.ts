/**
 * A plain HTTP answer (REST, probes, metrics, OpenAPI, refusals at the edge),
 * the vocabulary below every layer that answers HTTP (src/http: edge,
 * transport, observability and the runtime adapters import it, it imports
 * only the domain's error table):
 * status, headers and the whole body as bytes, written by each runtime's
 * adapter in one go. Every error answer is made by `errorAnswer`, from the one
 * error table.
 */
import { challengeOf, errorBody, methodNotAllowed, type RegistryError } from "../domain/errors.js";

export interface HttpAnswer {
  readonly status: number;
  /** Lower-case names. `content-length` is set by the adapter from the body. */
  readonly headers: Readonly<Record<string, string>>;
  /** null: no body (HEAD, 304). */
  readonly body: Uint8Array | null;
  /**
   * Trailers sent after the body (gRPC's status; HTTP/2 only). An answer with trailers has no
   * `content-length`.
   */
  readonly trailers?: Readonly<Record<string, string>>;
}

/**
 * A streaming answer (a watch: the lean gRPC watch, Server-Sent Events): headers at once, then the body's
 * chunks as they come, then the trailers, if any.
 */
export interface StreamAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The chunks, in groups to be written at once (a batch's events, each made once and shared by every watcher
   * it goes to); a reader that stops early (the client left) returns the iterator, which ends the work.
   */
  readonly body: AsyncIterable<readonly Uint8Array[]>;
  /** The trailers (gRPC's status; none for SSE), read once the body has ended. */
  trailers(): Record<string, string>;
}

export const JSON_CONTENT_TYPE = "application/json; charset=utf-8";

const encoder = new TextEncoder();

/** `body` as UTF-8 bytes. */
export function utf8(body: string): Uint8Array {
  return encoder.encode(body);
}

/** A JSON answer of a value, serialized here. */
export function jsonAnswer(status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): HttpAnswer {
  return { status, headers: { "content-type": JSON_CONTENT_TYPE, ...headers }, body: utf8(JSON.stringify(value)) };
}

/** The answer to `err`: its status, its body shape, for 401/403 the Bearer challenge, and its row's Retry-After. */
export function errorAnswer(err: RegistryError, headers: Readonly<Record<string, string>> = {}): HttpAnswer {
  const challenge = challengeOf(err);
  const retryAfter = err.row.retryAfterSeconds;
  return jsonAnswer(err.row.http, errorBody(err), {
    ...(challenge === undefined ? {} : { "www-authenticate": challenge }),
    ...(retryAfter === undefined ? {} : { "retry-after": String(retryAfter) }),
    ...headers,
  });
}

/** The same answer without its body, for HEAD. */
export function headOnly(answer: HttpAnswer): HttpAnswer {
  return {
    ...answer,
    body: null,
    headers: { ...answer.headers, "content-length": String(answer.body?.byteLength ?? 0) },
  };
}

/** The 405 for a path that takes other verbs, with its `Allow`. */
export function methodNotAllowedAnswer(verb: string, allowed: readonly string[]): HttpAnswer {
  return errorAnswer(methodNotAllowed(verb, allowed), { allow: allowed.join(", ") });
}

/**
 * The header of list and get answers (REST, and the RPCs' response headers) that carries the tenant revision
 * the read was made at: a decimal int64, the same value as a list's `revision`.
 */
export const REVISION_HEADER = "x-registry-revision";
