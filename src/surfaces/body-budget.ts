/**
 * The process-wide budget of request body bytes held in memory
 * (MAX_BUFFERED_BODY_BYTES). Each body is read through its request's share:
 * the share reserves the declared Content-Length (up to the body limit) when
 * reading starts, counts what arrives beyond it (a chunked body, an HTTP/2
 * stream without one), and gives everything back once, when the request is
 * over, whichever way it ended. A body that would take the process past the
 * budget is refused with 503 OVERLOADED before more of it is read.
 *
 * The bytes of a request are held from the first read to its end, not just
 * while they are copied: the parsed body and the message decoded from it live
 * that long too, so the budget bounds them as well.
 */
import { overloaded } from "../domain/errors.js";

export interface BodyBudget {
  /** MAX_BUFFERED_BODY_BYTES. */
  readonly limit: number;
  /** Bytes reserved by requests now. */
  readonly used: number;
  /** Bodies refused since the start. */
  readonly refused: number;
  /**
   * The share of one request: `declared` is its Content-Length, if any,
   * `reserveAtMost` the most reserved for it up front (the body limit: a longer
   * declared body is refused as too large without being read).
   */
  share(declared: number | undefined, reserveAtMost: number): BodyShare;
}

export interface BodyShare {
  /**
   * `body`, counted: reading it throws OVERLOADED (a RegistryError) where it would take the process past the
   * budget.
   */
  count(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array>;
  /**
   * For a body read chunk by chunk without `count`: before the first chunk, then with the bytes arrived so far
   * after each; throws OVERLOADED where they would take the process past the budget.
   */
  counted(seen: number): void;
  /** Gives the request's bytes back; only the first call counts. */
  release(): void;
  /** Whether reading the body was refused (OVERLOADED): the rest of it is not worth reading either. */
  readonly refused: boolean;
}

export function createBodyBudget(limit: number): BodyBudget {
  let used = 0;
  let refused = 0;
  const take = (n: number): boolean => {
    if (used + n > limit) {
      refused++;
      return false;
    }
    used += n;
    return true;
  };

  return {
    limit,
    get used() {
      return used;
    },
    get refused() {
      return refused;
    },
    share(declared, reserveAtMost) {
      let held = 0;
      let released = false;
      let refusedHere = false;
      const hold = (n: number): void => {
        if (released || n <= 0) return;
        if (!take(n)) {
          refusedHere = true;
          throw overloaded(limit);
        }
        held += n;
      };
      const counted = (seen: number): void => {
        // A declared body is reserved whole before its first byte is read: a client that sends part of it and stops
        // holds no more than it was allowed, and one that would not fit is refused at once.
        if (seen === 0 && declared !== undefined && declared > 0) hold(Math.min(declared, reserveAtMost) - held);
        else hold(seen - held);
      };
      return {
        get refused() {
          return refusedHere;
        },
        counted,
        async *count(body) {
          counted(0);
          let seen = 0;
          for await (const chunk of body) {
            seen += chunk.byteLength;
            counted(seen);
            yield chunk;
          }
        },
        release() {
          if (released) return;
          released = true;
          used -= held;
          held = 0;
        },
      };
    },
  };
}
