/**
 * The watch bench's SSE reading (watch-worker.ts): where each change's revision is found in a watcher's body as
 * it arrives, without decoding it.
 */
const ID_LINE = Buffer.from("\nid: ");
const EVENT_ERROR = Buffer.from("\nevent: error");

/** Bytes enough after an id line begun in the last read to end it and show its event's first letter. */
const BRIDGE = 64;

/**
 * Finds the events' `id:` lines in an SSE body, read as it arrives: notes each change's revision (a BOOKMARK's
 * is not a change) and reports an `event: error`. The body may be fed raw, chunked coding and all: the service
 * writes whole events to a chunk, so a chunk's size line falls between two events and ends with the CRLF whose
 * LF begins the next "\nid: ". What a read leaves unfinished (an id line begun, or the last bytes, which may
 * begin one) is kept, copied, and completed from the next read's first bytes, so `feed` may be given a view of
 * a buffer that the next read overwrites.
 */
export class SseIds {
  #tail: Buffer = Buffer.alloc(0);
  readonly #change: (revision: number) => void;
  readonly #error: (text: string) => void;

  constructor(change: (revision: number) => void, error: (text: string) => void) {
    this.#change = change;
    this.#error = error;
  }

  feed(data: Buffer): void {
    if (this.#tail.length > 0 && data.length < 4 * BRIDGE) {
      this.#scan(Buffer.concat([this.#tail, data]), Number.POSITIVE_INFINITY);
      return;
    }
    // An id line begun in the tail ends within the bridge; the lines that begin in `data` are found in it.
    if (this.#tail.length > 0) this.#scan(Buffer.concat([this.#tail, data.subarray(0, BRIDGE)]), this.#tail.length);
    this.#scan(data, Number.POSITIVE_INFINITY);
  }

  /** Notes the id lines that begin before `before` and, unless `before` is a bridge's tail, keeps the end. */
  #scan(buffer: Buffer, before: number): void {
    let at = 0;
    let unfinished = -1;
    for (;;) {
      const found = buffer.indexOf(ID_LINE, at);
      if (found === -1 || found >= before) break;
      const digits = found + ID_LINE.length;
      const end = buffer.indexOf(10, digits);
      // The id line and its event line's first letter ("B" of "event: BOOKMARK").
      if (end === -1 || end + 8 >= buffer.length) {
        unfinished = found;
        break;
      }
      if (buffer[end + 8] !== 66) this.#change(Number(buffer.toString("latin1", digits, end)));
      at = end;
    }
    if (buffer.indexOf(EVENT_ERROR) !== -1) this.#error(buffer.toString("utf8").slice(-400));
    if (before !== Number.POSITIVE_INFINITY) return;
    this.#tail = Buffer.from(buffer.subarray(unfinished !== -1 ? unfinished : Math.max(at, buffer.length - 4)));
  }
}
