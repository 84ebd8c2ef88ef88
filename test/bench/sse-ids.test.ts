/**
 * The watch bench's SSE reader (bench/sse-ids.ts) finds every change's revision once, in order, wherever the
 * reads of a chunked body happen to be cut: within an id line, within the "\nid: " that begins one, within a
 * chunk's size line, in the event line that tells a BOOKMARK from a change. A revision lost or counted twice
 * would show in the bench as a watcher that missed a write or saw it twice.
 */
import { describe, expect, it } from "vitest";
import { SseIds } from "../../bench/sse-ids.js";

/** One event as the SSE wire carries it, with a data line of about `size` bytes. */
function event(revision: number, type: string, size: number): string {
  const data = JSON.stringify({ type, revision: String(revision), padding: "x".repeat(size) });
  return `id: ${revision}\nevent: ${type}\ndata: ${data}\n\n`;
}

/** Groups of events framed as chunks of the chunked coding, after an opening comment. */
function chunkedBody(groups: readonly string[]): Buffer {
  const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
  return Buffer.from(`\r\n${chunk(": watching\n\n")}${groups.map(chunk).join("")}`, "latin1");
}

function read(body: Buffer, cuts: readonly number[]): { changes: number[]; errors: string[] } {
  const changes: number[] = [];
  const errors: string[] = [];
  const ids = new SseIds(
    (revision) => changes.push(revision),
    (text) => errors.push(text),
  );
  let from = 0;
  for (const cut of [...cuts, body.length]) {
    // Each read a view of one reused buffer, overwritten after it is fed, as the bench reads.
    const shared = Buffer.alloc(body.length);
    body.copy(shared, 0, from, cut);
    ids.feed(shared.subarray(0, cut - from));
    shared.fill(0);
    from = cut;
  }
  return { changes, errors };
}

/** A deterministic stream of numbers in [0, 1) (mulberry32). */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("the watch bench's SSE reader", () => {
  const short = chunkedBody([
    event(11, "ADDED", 20) + event(12, "MODIFIED", 20),
    event(13, "BOOKMARK", 0),
    event(14, "STATUS_CHANGED", 20),
  ]);
  const long = chunkedBody([
    event(998, "MODIFIED", 600) + event(999, "MODIFIED", 700),
    event(1000, "BOOKMARK", 0) + event(1001, "ADDED", 900),
  ]);

  it("finds each change once, in order, and no BOOKMARK, read whole", () => {
    expect(read(short, [])).toEqual({ changes: [11, 12, 14], errors: [] });
    expect(read(long, [])).toEqual({ changes: [998, 999, 1001], errors: [] });
  });

  it("finds the same wherever one read ends and the next begins", () => {
    for (const body of [short, long]) {
      const whole = read(body, []);
      for (let cut = 1; cut < body.length; cut++) expect(read(body, [cut]), `cut at ${cut}`).toEqual(whole);
    }
  });

  it("finds the same when a body arrives in many reads, short and long", () => {
    const next = random(20);
    const body = chunkedBody(
      Array.from({ length: 40 }, (_, group) =>
        [0, 1, 2]
          .map((n) => event(100 + group * 3 + n, n === 2 && group % 5 === 0 ? "BOOKMARK" : "ADDED", 300))
          .join(""),
      ),
    );
    const whole = read(body, []);
    expect(whole.changes).toHaveLength(120 - 8);
    for (let round = 0; round < 200; round++) {
      const cuts: number[] = [];
      for (let at = Math.floor(next() * 600); at < body.length; at += 1 + Math.floor(next() * 700)) cuts.push(at);
      expect(read(body, cuts), `cuts ${cuts.join(",")}`).toEqual(whole);
    }
  });

  it("reports an error event", () => {
    const body = chunkedBody([event(5, "ADDED", 10), `event: error\ndata: {"code":"WATCHER_TOO_SLOW"}\n\n`]);
    const { changes, errors } = read(body, []);
    expect(changes).toEqual([5]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain("WATCHER_TOO_SLOW");
  });
});
