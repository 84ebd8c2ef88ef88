/**
 * Change records read for watchers' starts, shared while any of them holds one (issue 50, item 1). Watchers that
 * replay the same revisions (a reconnecting fleet, a deploy's restart) each read every record whole and made their
 * own encodings of it (SSE bytes, a gRPC envelope and its gzip, Connect JSON): 32 watchers from `since=0` over 120
 * definitions of ~750 KB read 5.7 GB and held about twice what the replay budget counted (BENCHMARKS.md,
 * 2026-12-07). A record still held by a watcher (or its encodings) is handed to the next from memory, and a part
 * being read is awaited rather than read again; nothing is kept for its own sake: what no watcher holds is gone at
 * the next collection (WeakRef), so this holds no memory the watchers do not.
 *
 * A record handed from here shows its definition as it was when read, not as it is now: the log's order is kept,
 * and any later change of the definition is a later record the watcher gets in turn, as when the feed hands a
 * record read at a poll.
 */
import type { ChangeHead, ChangeRecord } from "./change-log.js";

export interface SharedRecords {
  /**
   * The records `heads` name (the tenant's, after `after`): from memory when every one of them is still held, from
   * a read already under way for the same part, else from `read`.
   */
  read(
    tenant: string,
    after: number,
    heads: readonly ChangeHead[],
    read: () => Promise<ChangeRecord[]>,
  ): Promise<ChangeRecord[]>;
  /** Records found in memory and parts joined, since the start (for tests, metrics). */
  stats(): { readonly reused: number; readonly joined: number };
}

export function createSharedRecords(): SharedRecords {
  const held = new Map<string, WeakRef<ChangeRecord>>();
  const collected = new FinalizationRegistry<string>((key) => {
    if (held.get(key)?.deref() === undefined) held.delete(key);
  });
  const reading = new Map<string, Promise<ChangeRecord[]>>();
  const keyOf = (tenant: string, revision: number) => `${tenant}\u0000${revision}`;
  let reused = 0;
  let joined = 0;
  return {
    async read(tenant, after, heads, read) {
      const found: ChangeRecord[] = [];
      for (const head of heads) {
        const record = held.get(keyOf(tenant, head.revision))?.deref();
        if (record === undefined) break;
        found.push(record);
      }
      if (found.length === heads.length) {
        reused += found.length;
        return found;
      }
      const part = `${keyOf(tenant, after)}\u0000${heads.length}`;
      const under = reading.get(part);
      if (under !== undefined) {
        joined++;
        return under;
      }
      const records = read().then((records) => {
        for (const record of records) {
          const key = keyOf(tenant, record.revision);
          held.set(key, new WeakRef(record));
          collected.register(record, key);
        }
        return records;
      });
      reading.set(part, records);
      try {
        return await records;
      } finally {
        reading.delete(part);
      }
    },
    stats: () => ({ reused, joined }),
  };
}
