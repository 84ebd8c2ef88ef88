// The local development issuer's key as a file in the data directory, with
// Deno's file APIs: the same file, mode and rules as local-issuer-key-file.ts
// (Node), so `npm run token` and both entrypoints share one key.
import type { KeyStore } from "../auth/local-issuer.js";
import type { DenoRuntime } from "./deno-runtime.js";
import { LOCAL_ISSUER_KEY_FILE } from "./local-issuer-key-file.js";

/** `${dataDir}/dev-issuer.jwk`, readable only by its owner (mode 0600), never overwritten. */
export function denoKeyFile(deno: DenoRuntime, dataDir: string): KeyStore {
  const path = `${dataDir.replace(/\/+$/, "")}/${LOCAL_ISSUER_KEY_FILE}`;
  return {
    location: path,
    async readKey() {
      try {
        return await deno.readTextFile(path);
      } catch (error: unknown) {
        if (error instanceof deno.errors.NotFound) return undefined;
        throw error;
      }
    },
    async writeKey(jwk) {
      await deno.mkdir(dataDir, { recursive: true });
      // createNew: never overwrite a key another process made first.
      await deno.writeTextFile(path, `${jwk}\n`, { mode: 0o600, createNew: true });
    },
  };
}
