/**
 * The registry's REST/JSON API (docs/api.md) as `asor` uses it, over fetch: `/api/asor/v1/{tenant}/...` when
 * `--tenant` names one, else `/asor/v1/...` (the token's tenant). A refusal (any answer but 2xx) and a registry
 * that cannot be reached both end the command with exit 3, the registry's own message and codes quoted.
 */
import { CliFailure, EXIT_REGISTRY, usageFailure } from "./exit-codes.js";

/** A stored definition as the registry answers it: its JSON, `meta` included. */
export type StoredJson = Record<string, unknown> & {
  readonly id: string;
  readonly meta?: { readonly status?: string };
};

/** How long one request may take. */
const REQUEST_TIMEOUT_MS = 30_000;
/** The page size of the lists read whole. */
const PAGE_LIMIT = 100;

export class RegistryClient {
  readonly #base: string;
  readonly #token: string | undefined;

  constructor(url: string | undefined, token: string | undefined, tenant: string | undefined) {
    if (url === undefined) throw usageFailure("no registry: set ASOR_URL or pass --url");
    if (!URL.canParse(url)) throw usageFailure(`--url/ASOR_URL "${url}" is not a URL`);
    const root = url.replace(/\/+$/, "");
    this.#base =
      tenant === undefined
        ? `${root}/asor/v1/agentDefinition`
        : `${root}/api/asor/v1/${encodeURIComponent(tenant)}/agentDefinition`;
    this.#token = token;
  }

  get(id: string): Promise<StoredJson> {
    return this.#request("GET", `/${encodeURIComponent(id)}`) as Promise<StoredJson>;
  }

  /** POST: creates or updates the definition of its name, provider and version. */
  upsert(definition: unknown): Promise<StoredJson> {
    return this.#request("POST", "", definition) as Promise<StoredJson>;
  }

  setStatus(id: string, status: string, statusMessage: string): Promise<unknown> {
    return this.#request("PATCH", `/${encodeURIComponent(id)}/status`, { status, statusMessage });
  }

  /** Every definition the list's `params` find, all pages. */
  async list(params: readonly [string, string][]): Promise<StoredJson[]> {
    const all: StoredJson[] = [];
    let token: string | undefined;
    do {
      const query = new URLSearchParams([...params, ["limit", String(PAGE_LIMIT)]]);
      if (token !== undefined) query.set("pageToken", token);
      const page = (await this.#request("GET", `?${query}`)) as { data?: StoredJson[]; nextPageToken?: string };
      all.push(...(page.data ?? []));
      token = page.nextPageToken;
    } while (token !== undefined);
    return all;
  }

  async #request(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let answer: Response;
    try {
      answer = await fetch(`${this.#base}${path}`, {
        method,
        headers,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : error;
      throw new CliFailure(EXIT_REGISTRY, `the registry at ${this.#base} could not be reached: ${cause}`);
    }
    const text = await answer.text();
    if (!answer.ok) throw refusal(method, answer.status, text);
    try {
      return JSON.parse(text);
    } catch {
      throw new CliFailure(EXIT_REGISTRY, `${method} ${this.#base}${path}: the answer is not JSON`);
    }
  }
}

/** The registry's refusal, with its message and each problem's path and code. */
function refusal(method: string, status: number, text: string): RegistryRefusal {
  let lines = [text.slice(0, 500)];
  try {
    const body = JSON.parse(text) as {
      error?: string;
      code?: string;
      errors?: { error?: string; code?: string; path?: string }[];
    };
    lines = [
      body.code === undefined ? (body.error ?? "") : `${body.code}: ${body.error ?? ""}`,
      ...(body.errors ?? []).map((e) => `  ${e.path ?? ""} ${e.code ?? ""}: ${e.error ?? ""}`),
    ];
  } catch {}
  return new RegistryRefusal(status, `the registry refused ${method} (${status}): ${lines.join("\n")}`);
}

/** A refusal of the registry (exit 3); `status` is its HTTP status. */
export class RegistryRefusal extends CliFailure {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(EXIT_REGISTRY, message);
  }
}
