// Types of scripts/deno.mjs for the TypeScript that imports it (bench/processes.ts).

/** The deno binary for this machine: the installed package's, else `deno` on PATH. */
export function denoPath(): string;

/** `deno run`'s arguments for the service, with the narrowest permissions it works with (DATA_DIR from `env`). */
export function denoServeArgs(env?: Record<string, string | undefined>): string[];
