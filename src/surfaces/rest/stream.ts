/**
 * A watch over REST: its events as a `text/event-stream` answer (Server-Sent
 * Events): a comment at once, then an event each; a failure after the start
 * (an expired token, a watcher too slow) is an `error` event, then the end.
 * Not cached, and not buffered by proxies that honour `X-Accel-Buffering`.
 * Each event's bytes, and a batch's, are made once for all the watchers
 * handed the same events (watch-events.ts).
 */
import type { RegistryError } from "../../domain/errors.js";
import type { WatchEvent } from "../../domain/watch.js";
import type { StreamAnswer } from "../../http/http-answer.js";
import { SSE_OPEN, sseBatch, sseError } from "../encoding/watch-events.js";

const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-store",
  "x-accel-buffering": "no",
};

/** The SSE answer of `events`; `failureOf` maps a failure after the start once, for its `error` event. */
export function eventStream(
  events: AsyncIterable<readonly WatchEvent[]>,
  failureOf: (err: unknown) => RegistryError,
): StreamAnswer {
  async function* body(): AsyncGenerator<readonly Uint8Array[]> {
    yield [SSE_OPEN];
    try {
      // A batch (what was ready at once) as one write.
      for await (const batch of events) yield sseBatch(batch);
    } catch (err) {
      yield [sseError(failureOf(err))];
    }
  }
  return { status: 200, headers: SSE_HEADERS, body: body(), trailers: () => ({}) };
}
