/**
 * Fetches an agent's live A2A card the way the A2A SDKs resolve it (issue 44, item 1; A2A v1.0 §8.2, a2a-js 1.x):
 * `.well-known/agent-card.json` resolved relative to the agent's `url`, one GET with `A2A-Version: 1.0`. Unlike
 * the SDKs, a probe is bounded: a deadline for the whole of it, a body limit, at most a few redirects, no
 * credentials (a URL's user information is never sent, no cookie is kept), a User-Agent naming the registry, and
 * every connection made to an address the guard allowed (address-guard.ts): the host name is resolved here, the
 * address checked, and the connection made to that address (the name still goes as `Host` and TLS's server
 * name), so a name cannot resolve elsewhere between the check and the connection. Each hop of a redirect is
 * resolved and checked anew.
 */
import { lookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { type ProbeAllowance, refusalOf } from "./address-guard.js";

/** Why a probe found no card. */
export type ProbeFailureKind =
  | "TIMEOUT"
  | "REFUSED"
  | "DNS"
  | "TLS"
  | "NETWORK"
  | "BLOCKED_ADDRESS"
  | "REDIRECTS"
  | "HTTP_STATUS"
  | "TOO_LARGE"
  | "NOT_A_CARD";

export interface ProbeLimits {
  /** The whole probe, redirects and body included. */
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  readonly maxRedirects: number;
  readonly allowance: ProbeAllowance;
  readonly userAgent: string;
}

export type ProbeOutcome =
  | { readonly ok: true; readonly card: Record<string, unknown>; readonly status: number; readonly latencyMs: number }
  | {
      readonly ok: false;
      readonly kind: ProbeFailureKind;
      /** The last answer's HTTP status, when there was one. */
      readonly status?: number;
      /** What happened, for an operator (no body of the agent's is quoted). */
      readonly message: string;
      readonly latencyMs: number;
    };

/** The well-known card path, relative (a2a-js's AGENT_CARD_PATH has no leading slash). */
const CARD_PATH = ".well-known/agent-card.json";

/** Where the live card of an agent at `agentUrl` is, as a2a-js's DefaultAgentCardResolver computes it. */
export function liveCardUrl(agentUrl: string): URL {
  return new URL(CARD_PATH, agentUrl);
}

class ProbeFailure extends Error {
  constructor(
    readonly kind: ProbeFailureKind,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** The live card of the agent at `agentUrl`, or why there is none. Never throws. */
export async function fetchLiveCard(
  agentUrl: string,
  limits: ProbeLimits,
  signal?: AbortSignal,
): Promise<ProbeOutcome> {
  const started = performance.now();
  const deadline = AbortSignal.timeout(limits.timeoutMs);
  const stop = signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
  const latencyMs = () => Math.round(performance.now() - started);
  try {
    let url = liveCardUrl(agentUrl);
    for (let hops = 0; ; hops++) {
      const answer = await get(url, limits, stop);
      const location = answer.headers.location;
      if (answer.statusCode !== undefined && answer.statusCode >= 300 && answer.statusCode < 400 && location) {
        answer.resume();
        if (hops >= limits.maxRedirects)
          throw new ProbeFailure("REDIRECTS", `more than ${limits.maxRedirects} redirects`, answer.statusCode);
        url = new URL(location, url);
        continue;
      }
      const status = answer.statusCode ?? 0;
      if (status < 200 || status > 299) {
        answer.resume();
        throw new ProbeFailure("HTTP_STATUS", `the card's URL answered ${status}`, status);
      }
      const card = cardOf(await bodyOf(answer, limits.maxBodyBytes, status), status);
      return { ok: true, card, status, latencyMs: latencyMs() };
    }
  } catch (err) {
    const failure = classify(err, deadline);
    return {
      ok: false,
      kind: failure.kind,
      ...(failure.status === undefined ? {} : { status: failure.status }),
      message: failure.message,
      latencyMs: latencyMs(),
    };
  }
}

/** One GET of `url`, connected to an address the guard allows; resolves with the answer's head. */
async function get(url: URL, limits: ProbeLimits, signal: AbortSignal): Promise<IncomingMessage> {
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new ProbeFailure("NOT_A_CARD", `${url.protocol} is not HTTP`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const address = await allowedAddress(host, limits.allowance);
  signal.throwIfAborted();
  const options: RequestOptions & { servername?: string } = {
    host: address,
    port: url.port === "" ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    method: "GET",
    headers: {
      host: url.host,
      accept: "application/json",
      "a2a-version": "1.0",
      "user-agent": limits.userAgent,
    },
    agent: false,
    signal,
    ...(url.protocol === "https:" && isIP(host) === 0 ? { servername: host } : {}),
  };
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return await new Promise<IncomingMessage>((resolve, reject) => {
    const req = send(options, resolve);
    req.once("error", reject);
    req.end();
  });
}

/** The first address of `host` (resolved here unless it is one) that the guard allows. */
async function allowedAddress(host: string, allowance: ProbeAllowance): Promise<string> {
  const addresses =
    isIP(host) === 0 ? (await lookup(host, { all: true, verbatim: true })).map((a) => a.address) : [host];
  let refusal: string | undefined;
  for (const address of addresses) {
    const why = refusalOf(address, host, allowance);
    if (why === undefined) return address;
    refusal ??= why;
  }
  throw new ProbeFailure("BLOCKED_ADDRESS", `${host}: ${refusal ?? "no address"}; PROBE_ALLOW can allow it`);
}

/** The body, at most `limit` bytes (a longer one is a failure as soon as it is known to be). */
async function bodyOf(answer: IncomingMessage, limit: number, status: number): Promise<Buffer> {
  const declared = Number(answer.headers["content-length"]);
  if (declared > limit) {
    answer.destroy();
    throw new ProbeFailure("TOO_LARGE", `the card is ${declared} bytes, over the ${limit} allowed`, status);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of answer as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      answer.destroy();
      throw new ProbeFailure("TOO_LARGE", `the card is over the ${limit} bytes allowed`, status);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The body as a card: a JSON object with a `name` and its interfaces (v1.0's list, or v0.3's `url`). */
function cardOf(body: Buffer, status: number): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw new ProbeFailure("NOT_A_CARD", "the answer is not JSON in UTF-8", status);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json))
    throw new ProbeFailure("NOT_A_CARD", "the answer is not a JSON object", status);
  const card = json as Record<string, unknown>;
  if (typeof card.name !== "string" || !(Array.isArray(card.supportedInterfaces) || typeof card.url === "string"))
    throw new ProbeFailure("NOT_A_CARD", "the answer has no `name` and interfaces of an agent card", status);
  return card;
}

const TLS_CODES = /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|HOSTNAME_MISMATCH|ERR_CERT)/;

function classify(err: unknown, deadline: AbortSignal): ProbeFailure {
  if (err instanceof ProbeFailure) return err;
  if (deadline.aborted) return new ProbeFailure("TIMEOUT", "no whole answer within the probe's timeout");
  const code = String((err as { code?: unknown }).code ?? "");
  if (code === "ECONNREFUSED") return new ProbeFailure("REFUSED", "the connection was refused");
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ENODATA")
    return new ProbeFailure("DNS", "the host name did not resolve");
  if (TLS_CODES.test(code)) return new ProbeFailure("TLS", `TLS failed (${code})`);
  if (err instanceof TypeError && /Invalid URL/.test(err.message)) return new ProbeFailure("NOT_A_CARD", "invalid URL");
  return new ProbeFailure("NETWORK", code === "" ? "the connection failed" : `the connection failed (${code})`);
}
