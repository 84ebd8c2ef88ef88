/** SQL text built in pieces (the searches' statements: search.ts, words.ts, pages.ts), with its bindings in order. */
import type { ReadBinding } from "./reads.js";

/** One statement and its bindings. */
export interface Statement {
  readonly sql: string;
  readonly bindings: readonly ReadBinding[];
}

/** SQL fragments and their bindings, in order. */
export class Sql {
  readonly parts: string[] = [];
  readonly bindings: ReadBinding[] = [];
  add(sql: string, ...bindings: ReadBinding[]): this {
    this.parts.push(sql);
    this.bindings.push(...bindings);
    return this;
  }
  in(values: readonly ReadBinding[]): this {
    return this.add(`IN (${values.map(() => "?").join(", ")})`, ...values);
  }
  get sql(): string {
    return this.parts.join(" ");
  }
}
