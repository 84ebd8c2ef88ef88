#!/usr/bin/env node
// `asor`, the registry's command line (docs/cli.md): definitions kept as files, validated offline, applied to a
// registry over its REST API. package.json's "bin" points at this file's build (dist/src/cli/asor.js);
// `npm run -s asor -- <command>` runs it in a checkout, building dist/ first when it is stale.
import { EXIT_PROBLEMS } from "./exit-codes.js";
import { runCli } from "./run.js";

runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // A failure no command foresaw: its message, the stack only when asked for (ASOR_DEBUG=1).
    const detail = process.env.ASOR_DEBUG ? (error as Error).stack : (error as Error).message;
    console.error(`asor: unexpected failure: ${error instanceof Error ? detail : String(error)}`);
    process.exitCode = EXIT_PROBLEMS;
  },
);
