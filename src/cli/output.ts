/**
 * What `asor` prints: results on stdout (text, or one JSON document with `--output json`), messages and the
 * progress line on stderr. Colour only when the stream is a terminal and NO_COLOR is not set.
 */
import type { Writable } from "node:stream";

export type OutputFormat = "text" | "json";

/** The streams the CLI writes to, and whether each is a terminal. */
export interface CliStreams {
  readonly stdout: Writable & { readonly isTTY?: boolean };
  readonly stderr: Writable & { readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
}

const COLOURS = { red: 31, green: 32, yellow: 33, cyan: 36, dim: 2 } as const;
export type Colour = keyof typeof COLOURS;

export class Output {
  readonly format: OutputFormat;
  readonly #streams: CliStreams;
  readonly #colour: boolean;
  #progressShown = false;

  constructor(streams: CliStreams, format: OutputFormat) {
    this.#streams = streams;
    this.format = format;
    this.#colour = streams.stdout.isTTY === true && (streams.env.NO_COLOR ?? "") === "";
  }

  get json(): boolean {
    return this.format === "json";
  }

  /** `text` in `colour` when stdout is a terminal, else as it is. */
  paint(colour: Colour, text: string): string {
    return this.#colour ? `\u001b[${COLOURS[colour]}m${text}\u001b[0m` : text;
  }

  /** One line of text results (nothing with `--output json`). */
  line(text: string): void {
    if (!this.json) this.#write(this.#streams.stdout, `${text}\n`);
  }

  /** The one JSON document of `--output json` (nothing in text mode). */
  document(value: unknown): void {
    if (this.json) this.#write(this.#streams.stdout, `${JSON.stringify(value, null, 2)}\n`);
  }

  /** Text on stdout whatever the format (a definition's JSON). */
  raw(text: string): void {
    this.#write(this.#streams.stdout, text.endsWith("\n") ? text : `${text}\n`);
  }

  /** A message on stderr. */
  message(text: string): void {
    this.#write(this.#streams.stderr, `${text}\n`);
  }

  /** `done` of `total` on one line of stderr, rewritten in place; only when stderr is a terminal. */
  progress(label: string, done: number, total: number): void {
    if (this.#streams.stderr.isTTY !== true) return;
    this.#streams.stderr.write(`\r\u001b[2K${label} ${done}/${total}`);
    this.#progressShown = true;
  }

  #write(stream: Writable, text: string): void {
    if (this.#progressShown) {
      this.#streams.stderr.write("\r\u001b[2K");
      this.#progressShown = false;
    }
    stream.write(text);
  }
}
