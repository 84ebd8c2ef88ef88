/**
 * The few Deno APIs the Deno entrypoint uses, typed here so the Node
 * typecheck (which has no Deno types) checks `src/main/deno*.ts` too. A global
 * `declare const Deno` would let Node code use Deno by mistake, and would clash
 * with Deno's own declarations under `deno check`; a typed view of
 * `globalThis` does neither.
 */
export interface DenoRuntime {
  readonly env: { toObject(): Record<string, string> };
  serve(options: DenoServeOptions, handler: (request: Request) => Response | Promise<Response>): DenoHttpServer;
  addSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
  exit(code?: number): never;
  readTextFile(path: string): Promise<string>;
  writeTextFile(path: string, data: string, options?: { mode?: number; createNew?: boolean }): Promise<void>;
  mkdir(path: string, options?: { recursive?: boolean }): Promise<void>;
  readonly errors: { readonly NotFound: new (...args: never[]) => Error };
}

export interface DenoServeOptions {
  readonly port: number;
  readonly hostname: string;
  onListen?(address: { hostname: string; port: number }): void;
  onError?(error: unknown): Response | Promise<Response>;
}

export interface DenoHttpServer {
  readonly addr: { readonly hostname: string; readonly port: number };
  /** Stops accepting and resolves once open requests are answered. */
  shutdown(): Promise<void>;
}

/** The `Deno` global; throws when not running under Deno. */
export function denoRuntime(): DenoRuntime {
  const deno = (globalThis as { Deno?: DenoRuntime }).Deno;
  if (deno === undefined) throw new Error("This entrypoint runs under Deno (npm run start:deno); under Node use npm start.");
  return deno;
}
