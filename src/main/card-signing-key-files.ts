// The registry's card signing keys as the configuration names them (Node): the private JWK of
// CARD_SIGNING_KEY_FILE, every `*.jwk` and `*.json` of CARD_SIGNING_KEYS_DIR, or else the P-256 key made on
// first start in `${dataDir}/card-signing.jwk` (mode 0600), as the development issuer's key is.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { loadOrCreateKey } from "../auth/local-issuer.js";
import { type Config, ConfigError } from "../config.js";
import { type CardKey, type KeySource, parseCardKeys } from "../domain/card-keys.js";
import { dataDirKeyFile } from "./local-issuer-key-file.js";

export const CARD_SIGNING_KEY_FILE = "card-signing.jwk";

/** Reads the keys when called (at start); a bad or missing key is a ConfigError naming the file. */
export function cardSigningKeyFiles(config: Pick<Config, "cardSigning" | "dataDir">): () => Promise<CardKey[]> {
  return async () => {
    const { keys, problems } = parseCardKeys(await keySources(config));
    // A card is signed from the first request on: some key must sign now.
    const first = keys[0];
    if (first !== undefined && first.activeFromMs > Date.now())
      problems.push(
        `card signing keys: none is active yet (the first, "${first.kid}", from nbf ${first.activeFromMs / 1000})`,
      );
    if (problems.length > 0) throw new ConfigError(problems);
    return keys;
  };
}

async function keySources({ cardSigning, dataDir }: Pick<Config, "cardSigning" | "dataDir">): Promise<KeySource[]> {
  const { keyFile, keysDir } = cardSigning;
  if (keyFile !== undefined) return [await readKey(keyFile, "CARD_SIGNING_KEY_FILE")];
  if (keysDir !== undefined) {
    let names: string[];
    try {
      names = await readdir(keysDir);
    } catch (error: unknown) {
      throw new ConfigError([`CARD_SIGNING_KEYS_DIR ${keysDir} cannot be read (${(error as Error).message})`]);
    }
    const files = names.filter((name) => /\.(jwk|json)$/.test(name)).sort();
    return Promise.all(files.map((name) => readKey(join(keysDir, name), "CARD_SIGNING_KEYS_DIR")));
  }
  const store = dataDirKeyFile(dataDir, CARD_SIGNING_KEY_FILE);
  return [{ jwk: await loadOrCreateKey(store, "card signing key"), location: store.location ?? dataDir }];
}

async function readKey(path: string, setting: string): Promise<KeySource> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error: unknown) {
    throw new ConfigError([`${setting}: ${path} cannot be read (${(error as Error).message})`]);
  }
  try {
    return { jwk: JSON.parse(text), location: path };
  } catch {
    return { jwk: undefined, location: path };
  }
}
