// The local development issuer's key as a file in the data directory (Node):
// `${dataDir}/dev-issuer.jwk`, readable only by its owner (mode 0600). The
// card signing key made by default is kept the same way (dataDirKeyFile).
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { KeyStore } from "../auth/local-issuer.js";

export const LOCAL_ISSUER_KEY_FILE = "dev-issuer.jwk";

export function localIssuerKeyFile(dataDir: string): KeyStore {
  return dataDirKeyFile(dataDir, LOCAL_ISSUER_KEY_FILE);
}

/** A key kept as `${dataDir}/${fileName}`, readable only by its owner. */
export function dataDirKeyFile(dataDir: string, fileName: string): KeyStore {
  const path = join(dataDir, fileName);
  return {
    location: path,
    async readKey() {
      try {
        return await readFile(path, "utf8");
      } catch (error: unknown) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw error;
      }
    },
    async writeKey(jwk) {
      // Owner only (0700), like the database the storage keeps here.
      await mkdir(dataDir, { recursive: true, mode: 0o700 });
      // "wx": never overwrite a key another process made first.
      await writeFile(path, `${jwk}\n`, { mode: 0o600, flag: "wx" });
    },
  };
}
