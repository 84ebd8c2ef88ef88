/**
 * The registry's REST API as the catalog calls it: the contract's paths (`/asor/v1/agentDefinition`, the tenant
 * from the token), the bearer token of the session, and every error turned into an ApiError with the status, the
 * error code and the message the registry answered, so a page can show them.
 */
import type { AgentCard, Definition, DefinitionPage } from "./model.js";
import { currentToken, sessionExpired } from "./session.js";

const BASE = "/asor/v1/agentDefinition";

/** A refusal or failure of the API, as the page shows it. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A definition and the ETag it was read with. */
export interface Tagged<T> {
  readonly value: T;
  readonly etag: string | undefined;
}

async function call(path: string, init: RequestInit = {}): Promise<Response> {
  const token = currentToken();
  if (token === undefined) throw new ApiError(401, "UNAUTHENTICATED", "You are not signed in.");
  let response: Response;
  try {
    response = await fetch(path, {
      ...init,
      headers: {
        ...(init.headers as Record<string, string>),
        authorization: `Bearer ${token}`,
        accept: "application/json",
      },
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, "NETWORK", `The registry could not be reached (${(error as Error).message}).`);
  }
  if (response.ok) return response;
  const { code, message } = await errorOf(response);
  if (response.status === 401) sessionExpired(message);
  throw new ApiError(response.status, code, message);
}

/** The code and message of an error answer: `{error, code}` or `{error, errors: [{code}]}`. */
async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  try {
    const body = (await response.json()) as { error?: string; code?: string; errors?: { code?: string }[] };
    return {
      code: body.code ?? body.errors?.[0]?.code ?? `HTTP_${response.status}`,
      message: body.error ?? response.statusText,
    };
  } catch {
    return { code: `HTTP_${response.status}`, message: response.statusText || `HTTP ${response.status}` };
  }
}

/** The list's parameters, as the REST API takes them (repeated ones as arrays). */
export type ListQuery = Readonly<Record<string, string | readonly string[] | undefined>>;

function search(query: ListQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === "") continue;
    for (const v of typeof value === "string" ? [value] : value) if (v !== "") params.append(name, v);
  }
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

export async function listDefinitions(query: ListQuery): Promise<DefinitionPage> {
  return (await call(`${BASE}${search(query)}`)).json() as Promise<DefinitionPage>;
}

export async function getDefinition(id: string): Promise<Tagged<Definition>> {
  const response = await call(`${BASE}/${encodeURIComponent(id)}`);
  return { value: (await response.json()) as Definition, etag: response.headers.get("etag") ?? undefined };
}

export async function listVersions(id: string, pageToken?: string): Promise<DefinitionPage> {
  const query = search({ limit: "100", pageToken });
  return (await call(`${BASE}/${encodeURIComponent(id)}/versions${query}`)).json() as Promise<DefinitionPage>;
}

export async function getAgentCard(id: string): Promise<AgentCard> {
  return (await call(`${BASE}/${encodeURIComponent(id)}/agentCard`)).json() as Promise<AgentCard>;
}

/** Sets a version's status, on the condition that it is still the version read (`etag`). */
export async function setStatus(id: string, status: string, etag: string, statusMessage?: string): Promise<Definition> {
  const response = await call(`${BASE}/${encodeURIComponent(id)}/status`, {
    method: "PATCH",
    headers: { "content-type": "application/json", "if-match": etag },
    body: JSON.stringify({ status, ...(statusMessage ? { statusMessage } : {}) }),
  });
  return (await response.json()) as Definition;
}
