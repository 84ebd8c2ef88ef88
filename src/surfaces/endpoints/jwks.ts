/**
 * The JWKS door: `GET /.well-known/jwks.json`, the public keys of the registry's card signing keys (issue 43),
 * with which anyone checks the `signatures` of the agent cards it serves. No token: it holds no data. It is not
 * the development issuer's key set (which signs tokens and is never served).
 */
import type { PublishedCardKeys } from "../../domain/card-keys.js";
import { type HttpAnswer, utf8 } from "../../http/http-answer.js";
import { readOnly } from "../../http/http-endpoint.js";
import type { Door } from "../pipeline/door.js";

export const JWKS_PATH = "/.well-known/jwks.json";

/**
 * How long a client may reuse the key set at most: five minutes, so a verifier learns a new key soon; less when
 * a retired key leaves the set sooner. A new key is published from the start, before it signs: a reused set
 * never lacks the key of a card.
 */
const JWKS_MAX_AGE_SECONDS = 300;

/** The answer of `published` now. */
export function jwksAnswer(published: PublishedCardKeys): HttpAnswer {
  const { keys, validForMs } = published();
  const maxAge = Math.min(JWKS_MAX_AGE_SECONDS, Math.floor((validForMs ?? Number.POSITIVE_INFINITY) / 1000));
  return {
    status: 200,
    headers: { "content-type": "application/jwk-set+json", "cache-control": `public, max-age=${maxAge}` },
    body: utf8(JSON.stringify({ keys: keys.map((key) => key.publicJwk) })),
  };
}

export function jwksDoor(published: PublishedCardKeys): Door<string> {
  const handle = readOnly(async () => jwksAnswer(published));
  return {
    name: "jwks",
    matches: (_req, { pathname }) => (pathname === JWKS_PATH ? pathname : undefined),
    async serve(req, pathname, record) {
      record.protocol = "http";
      record.endpoint = pathname;
      return { http: await handle(req.method) };
    },
  };
}
