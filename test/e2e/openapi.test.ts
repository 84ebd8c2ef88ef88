import { generateKeyPairSync, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import { beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "../support/databases.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import { committedOpenApi, createOpenApiChecker, longestRequestLine } from "../support/openapi.js";
import { useServer } from "../support/server.js";

const T = "/api/asor/v1/default/agentDefinition";
const C = "/asor/v1/agentDefinition";
const ADMIN = "/asor/v1/admin/tenants";
const UNKNOWN_ID = "0123456789abcdef0123456789abcdef";

/**
 * Who calls: the default tenant with every domain, no token, a token without domains, a token of a tenant
 * that was never set up.
 */
type Caller = "all" | "none" | "no-domains" | "unknown-tenant";

/** One call of the REST surface whose answer is checked against the document. */
interface Scenario {
  readonly name: string;
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** The path; `{id}` stands for the id of a definition this suite created. */
  readonly path: string;
  readonly caller?: Caller;
  readonly body?: () => { contentType?: string; body: BodyInit };
  /** Other request headers (the conditional ones). */
  readonly headers?: Readonly<Record<string, string>>;
  readonly status: number;
}

const json = (value: unknown) => () => ({ contentType: "application/json", body: JSON.stringify(value) });
const multipart = (part: string, value: unknown) => () => {
  const form = new FormData();
  form.set(part, JSON.stringify(value));
  return { body: form };
};
const tenantName = `openapi-${randomBytes(4).toString("hex")}`;
/** The definition the suite creates first; `{id}` is its id, `{reference}` its agent's. */
const FIXTURE = { ...exampleDefinition(), version: "openapi-fixture" };

/**
 * For every operation: its success, and each error status a client meets (400, 401, 403, 404, 415, and 413,
 * 409 where listed).
 */
const SCENARIOS: Scenario[] = [
  // The watch's refusals; its 200 is a stream, read by a test of its own below.
  ...[`${T}Events`, `${C}Events`].flatMap((base): Scenario[] => [
    { name: "watches from a since that is no revision", method: "GET", path: `${base}?since=x`, status: 400 },
    { name: "watches without a token", method: "GET", path: base, caller: "none", status: 401 },
    { name: "watches without a security domain", method: "GET", path: base, caller: "no-domains", status: 403 },
    {
      name: "watches an unknown tenant",
      method: "GET",
      path: base.replace("/default/", "/nowhere/"),
      caller: "unknown-tenant",
      status: 404,
    },
  ]),
  // The tenant's AI Catalog (issue 45), at the tenant's path and at the root for the caller's tenant.
  ...["/api/asor/v1/default/.well-known/ai-catalog.json", "/.well-known/ai-catalog.json"].flatMap(
    (path): Scenario[] => [
      { name: "gets the AI Catalog", method: "GET", path, status: 200 },
      { name: "gets the AI Catalog with a query", method: "GET", path: `${path}?limit=5`, status: 400 },
      { name: "gets the AI Catalog without a token", method: "GET", path, caller: "none", status: 401 },
      { name: "gets the AI Catalog without a security domain", method: "GET", path, caller: "no-domains", status: 403 },
      {
        name: "gets the AI Catalog of an unknown tenant",
        method: "GET",
        path: path.replace("/default/", "/nowhere/"),
        caller: "unknown-tenant",
        status: 404,
      },
    ],
  ),
  // An agent's A2A base URL (issue 45): its card there and at the base URL itself, `{reference}` its agent.
  ...["/a2a/default/{reference}/.well-known/agent-card.json", "/a2a/default/{reference}"].flatMap(
    (path): Scenario[] => [
      { name: "gets an agent's base card", method: "GET", path, status: 200 },
      { name: "gets an agent's base card with a query", method: "GET", path: `${path}?limit=5`, status: 400 },
      { name: "gets an agent's base card without a token", method: "GET", path, caller: "none", status: 401 },
      {
        name: "gets an agent's base card without a security domain",
        method: "GET",
        path,
        caller: "no-domains",
        status: 403,
      },
      {
        name: "gets the base card of an unknown agent",
        method: "GET",
        path: path.replace("{reference}", "Z-999999"),
        status: 404,
      },
      {
        name: "gets the base card the caller holds",
        method: "GET",
        path,
        headers: { "if-none-match": "*" },
        status: 304,
      },
    ],
  ),
  ...[T, C].flatMap((base): Scenario[] => [
    { name: "lists", method: "GET", path: `${base}?limit=5`, status: 200 },
    { name: "lists with a limit out of range", method: "GET", path: `${base}?limit=0`, status: 400 },
    {
      name: "lists by filters, keywords and order, a page with a next page token",
      method: "GET",
      path:
        `${base}?limit=1&status=ALL&q=customer&skillId=sentiment_analysis&skillId=x&orderBy=name%20desc` +
        "&latest=false&updatedSince=2000-01-01T00%3A00%3A00Z",
      status: 200,
    },
    { name: "lists with a malformed page token", method: "GET", path: `${base}?pageToken=%21`, status: 400 },
    ...["createdAt", "createdAt desc", "updatedAt", "updatedAt desc", "name", "name desc"].map(
      (order): Scenario => ({
        name: `lists in the order ${order}`,
        method: "GET",
        path: `${base}?orderBy=${encodeURIComponent(order)}`,
        status: 200,
      }),
    ),
    {
      name: "lists in an order the document does not offer",
      method: "GET",
      path: `${base}?orderBy=name%20asc`,
      status: 400,
    },
    {
      name: "lists updated since a date-time with a fraction and an offset",
      method: "GET",
      path: `${base}?updatedSince=2000-01-01T00%3A00%3A00.123456789%2B05%3A30`,
      status: 200,
    },
    {
      name: "lists updated since a date that is no date-time",
      method: "GET",
      path: `${base}?updatedSince=2000-01-01`,
      status: 400,
    },
    { name: "lists without a token", method: "GET", path: base, caller: "none", status: 401 },
    { name: "lists without a security domain", method: "GET", path: base, caller: "no-domains", status: 403 },
    {
      name: "lists an unknown tenant",
      method: "GET",
      path: base.replace("/default/", "/nowhere/"),
      caller: "unknown-tenant",
      status: 404,
    },
    { name: "gets", method: "GET", path: `${base}/{id}`, status: 200 },
    { name: "gets with an unknown query parameter", method: "GET", path: `${base}/{id}?limit=5`, status: 400 },
    { name: "gets without a token", method: "GET", path: `${base}/{id}`, caller: "none", status: 401 },
    { name: "gets without a security domain", method: "GET", path: `${base}/{id}`, caller: "no-domains", status: 403 },
    { name: "gets an unknown id", method: "GET", path: `${base}/${UNKNOWN_ID}`, status: 404 },
    { name: "lists versions", method: "GET", path: `${base}/{id}/versions`, status: 200 },
    {
      name: "lists versions with a limit out of range",
      method: "GET",
      path: `${base}/{id}/versions?limit=101`,
      status: 400,
    },
    {
      name: "lists versions without a token",
      method: "GET",
      path: `${base}/{id}/versions`,
      caller: "none",
      status: 401,
    },
    {
      name: "lists versions without a security domain",
      method: "GET",
      path: `${base}/{id}/versions`,
      caller: "no-domains",
      status: 403,
    },
    { name: "lists versions of an unknown agent", method: "GET", path: `${base}/${UNKNOWN_ID}/versions`, status: 404 },
    { name: "gets the agent card", method: "GET", path: `${base}/{id}/agentCard`, status: 200 },
    {
      name: "gets the agent card with an unknown query parameter",
      method: "GET",
      path: `${base}/{id}/agentCard?limit=5`,
      status: 400,
    },
    {
      name: "gets the agent card without a token",
      method: "GET",
      path: `${base}/{id}/agentCard`,
      caller: "none",
      status: 401,
    },
    {
      name: "gets the agent card without a security domain",
      method: "GET",
      path: `${base}/{id}/agentCard`,
      caller: "no-domains",
      status: 403,
    },
    {
      name: "gets the agent card of an unknown id",
      method: "GET",
      path: `${base}/${UNKNOWN_ID}/agentCard`,
      status: 404,
    },
    { name: "upserts JSON", method: "POST", path: base, body: json(exampleDefinition()), status: 201 },
    {
      name: "upserts multipart",
      method: "POST",
      path: base,
      body: multipart("agentCardAndTools", { ...exampleDefinition(), version: "multipart" }),
      status: 201,
    },
    {
      name: "upserts a definition without a name",
      method: "POST",
      path: base,
      body: json(minimalDefinition({ name: "" })),
      status: 400,
    },
    {
      name: "upserts without a token",
      method: "POST",
      path: base,
      caller: "none",
      body: json(minimalDefinition()),
      status: 401,
    },
    {
      name: "upserts without a security domain",
      method: "POST",
      path: base,
      caller: "no-domains",
      body: json(minimalDefinition()),
      status: 403,
    },
    {
      name: "upserts into an unknown tenant",
      method: "POST",
      path: base.replace("/default/", "/nowhere/"),
      caller: "unknown-tenant",
      body: json(minimalDefinition()),
      status: 404,
    },
    {
      name: "upserts too large a body",
      method: "POST",
      path: base,
      body: json({ ...minimalDefinition(), description: "a".repeat(1_100_000) }),
      status: 413,
    },
    {
      name: "upserts text/plain",
      method: "POST",
      path: base,
      body: () => ({ contentType: "text/plain", body: "hello" }),
      status: 415,
    },
    {
      name: "upserts create-only a key that exists",
      method: "POST",
      path: base,
      body: json(FIXTURE),
      headers: { "if-none-match": "*" },
      status: 412,
    },
    {
      name: "gets what the caller holds",
      method: "GET",
      path: `${base}/{id}`,
      headers: { "if-none-match": "*" },
      status: 304,
    },
    {
      name: "gets the agent card the caller holds",
      method: "GET",
      path: `${base}/{id}/agentCard`,
      headers: { "if-none-match": "*" },
      status: 304,
    },
    { name: "updates by id", method: "PUT", path: `${base}/{id}`, body: json(FIXTURE), status: 200 },
    {
      name: "updates by id, changing the key",
      method: "PUT",
      path: `${base}/{id}`,
      body: json({ ...FIXTURE, version: "other" }),
      status: 400,
    },
    {
      name: "updates by id without a token",
      method: "PUT",
      path: `${base}/{id}`,
      caller: "none",
      body: json(FIXTURE),
      status: 401,
    },
    {
      name: "updates by id without a security domain",
      method: "PUT",
      path: `${base}/{id}`,
      caller: "no-domains",
      body: json(FIXTURE),
      status: 403,
    },
    { name: "updates an unknown id", method: "PUT", path: `${base}/${UNKNOWN_ID}`, body: json(FIXTURE), status: 404 },
    {
      name: "updates by id with a stale If-Match",
      method: "PUT",
      path: `${base}/{id}`,
      body: json(FIXTURE),
      headers: { "if-match": '"stale"' },
      status: 412,
    },
    {
      name: "updates by id with too large a body",
      method: "PUT",
      path: `${base}/{id}`,
      body: json({ ...FIXTURE, description: "a".repeat(1_100_000) }),
      status: 413,
    },
    {
      name: "updates by id from text/plain",
      method: "PUT",
      path: `${base}/{id}`,
      body: () => ({ contentType: "text/plain", body: "hello" }),
      status: 415,
    },
    // A probe of the fixture's agent (issue 44): whatever it finds, the answer is the version with its liveness.
    { name: "probes", method: "POST", path: `${base}/{id}/probe`, status: 200 },
    { name: "probes a version named by no id", method: "POST", path: `${base}/not-an-id/probe`, status: 400 },
    { name: "probes without a token", method: "POST", path: `${base}/{id}/probe`, caller: "none", status: 401 },
    {
      name: "probes without a security domain",
      method: "POST",
      path: `${base}/{id}/probe`,
      caller: "no-domains",
      status: 403,
    },
    { name: "probes an unknown id", method: "POST", path: `${base}/${UNKNOWN_ID}/probe`, status: 404 },
    {
      name: "sets a status",
      method: "PATCH",
      path: `${base}/{id}/status`,
      body: json({ status: "DEPRECATED", statusMessage: "openapi" }),
      status: 200,
    },
    {
      name: "sets the status of an agent",
      method: "PATCH",
      path: `${base}/{reference}/status`,
      body: json({ status: "ACTIVE" }),
      status: 200,
    },
    { name: "sets no status", method: "PATCH", path: `${base}/{id}/status`, body: json({}), status: 400 },
    {
      name: "sets the status the proto calls unspecified",
      method: "PATCH",
      path: `${base}/{id}/status`,
      body: json({ status: "DEFINITION_STATUS_UNSPECIFIED" }),
      status: 400,
    },
    {
      name: "sets a status without a token",
      method: "PATCH",
      path: `${base}/{id}/status`,
      caller: "none",
      body: json({ status: "ACTIVE" }),
      status: 401,
    },
    {
      name: "sets a status without a security domain",
      method: "PATCH",
      path: `${base}/{id}/status`,
      caller: "no-domains",
      body: json({ status: "ACTIVE" }),
      status: 403,
    },
    {
      name: "sets the status of an unknown id",
      method: "PATCH",
      path: `${base}/${UNKNOWN_ID}/status`,
      body: json({ status: "ACTIVE" }),
      status: 404,
    },
    {
      name: "sets a status with a stale If-Match",
      method: "PATCH",
      path: `${base}/{id}/status`,
      body: json({ status: "ACTIVE" }),
      headers: { "if-match": '"stale"' },
      status: 412,
    },
    {
      name: "sets a status from too large a body",
      method: "PATCH",
      path: `${base}/{id}/status`,
      body: json({ status: "ACTIVE", statusMessage: "a".repeat(1_100_000) }),
      status: 413,
    },
    {
      name: "sets a status from text/plain",
      method: "PATCH",
      path: `${base}/{id}/status`,
      body: () => ({ contentType: "text/plain", body: "x" }),
      status: 415,
    },
  ]),
  {
    name: "lists naming the tenant as a query parameter",
    method: "GET",
    path: `${C}?tenant=default&offset=0`,
    status: 200,
  },
  { name: "lists tenants", method: "GET", path: ADMIN, status: 200 },
  { name: "lists tenants with an unknown query parameter", method: "GET", path: `${ADMIN}?name=x`, status: 400 },
  { name: "lists tenants without a token", method: "GET", path: ADMIN, caller: "none", status: 401 },
  { name: "lists tenants without a security domain", method: "GET", path: ADMIN, caller: "no-domains", status: 403 },
  {
    name: "creates a tenant",
    method: "POST",
    path: ADMIN,
    body: json({ name: tenantName, sequencePrefix: "OA-" }),
    status: 201,
  },
  {
    name: "creates a tenant as multipart",
    method: "POST",
    path: ADMIN,
    body: multipart("body", { name: `${tenantName}-mp` }),
    status: 201,
  },
  { name: "creates a tenant that exists", method: "POST", path: ADMIN, body: json({ name: "default" }), status: 409 },
  {
    name: "creates a tenant with a bad name",
    method: "POST",
    path: ADMIN,
    body: json({ name: "not a name" }),
    status: 400,
  },
  {
    name: "creates a tenant without a token",
    method: "POST",
    path: ADMIN,
    caller: "none",
    body: json({ name: "x" }),
    status: 401,
  },
  {
    name: "creates a tenant without a security domain",
    method: "POST",
    path: ADMIN,
    caller: "no-domains",
    body: json({ name: "x" }),
    status: 403,
  },
  {
    name: "creates a tenant from too large a body",
    method: "POST",
    path: ADMIN,
    body: json({ name: "a".repeat(1_100_000) }),
    status: 413,
  },
  {
    name: "creates a tenant from text/plain",
    method: "POST",
    path: ADMIN,
    body: () => ({ contentType: "text/plain", body: "x" }),
    status: 415,
  },
];

/** A provider's public key (issue 43), and the paths of its keys and of the default tenant's settings. */
const PUBLIC_JWK = {
  ...(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }) as Record<string, string>),
  kid: "oa-1",
  alg: "EdDSA",
};
const KEYS = `${ADMIN}/default/providers/${encodeURIComponent("Provider=oa")}/keys`;
const NO_TENANT_KEYS = KEYS.replace("/default/", "/nowhere/");

/** The tenant settings' and provider keys' operations (issue 43): their successes and refusals. */
const KEY_SCENARIOS: Scenario[] = [
  { name: "reads a tenant", method: "GET", path: `${ADMIN}/default`, status: 200 },
  { name: "reads a tenant with a query", method: "GET", path: `${ADMIN}/default?x=1`, status: 400 },
  { name: "reads a tenant without a token", method: "GET", path: `${ADMIN}/default`, caller: "none", status: 401 },
  { name: "reads a tenant, no domain", method: "GET", path: `${ADMIN}/default`, caller: "no-domains", status: 403 },
  { name: "reads an unknown tenant", method: "GET", path: `${ADMIN}/nowhere`, status: 404 },
  ...(
    [
      ["sets a setting", `${ADMIN}/default`, json({ signatures: "OPTIONAL" }), 200],
      ["sets a setting to no value", `${ADMIN}/default`, json({ signatures: "MAYBE" }), 400],
      ["sets a setting of an unknown tenant", `${ADMIN}/nowhere`, json({ signatures: "REQUIRED" }), 404],
      ["sets a provider's keys", KEYS, json({ keys: [PUBLIC_JWK] }), 200],
      ["sets a private key", KEYS, json({ keys: [{ ...PUBLIC_JWK, d: "AAAA" }] }), 400],
      ["sets keys in an unknown tenant", NO_TENANT_KEYS, json({ keys: [] }), 404],
    ] as const
  ).map(
    ([name, path, body, status]): Scenario => ({
      name,
      method: path === KEYS || path === NO_TENANT_KEYS ? "PUT" : "PATCH",
      path,
      body,
      status,
    }),
  ),
  ...([`${ADMIN}/default`, KEYS] as const).flatMap((path): Scenario[] => {
    const method = path === KEYS ? "PUT" : "PATCH";
    const body = json({ keys: [] });
    return [
      { name: "changes without a token", method, path, caller: "none", body, status: 401 },
      { name: "changes without a security domain", method, path, caller: "no-domains", body, status: 403 },
      { name: "changes from too large a body", method, path, body: json({ x: "a".repeat(1_100_000) }), status: 413 },
      {
        name: "changes from text/plain",
        method,
        path,
        body: () => ({ contentType: "text/plain", body: "x" }),
        status: 415,
      },
    ];
  }),
  { name: "reads a provider's keys", method: "GET", path: KEYS, status: 200 },
  { name: "reads a provider's keys with a query", method: "GET", path: `${KEYS}?x=1`, status: 400 },
  { name: "reads keys without a token", method: "GET", path: KEYS, caller: "none", status: 401 },
  { name: "reads keys without a security domain", method: "GET", path: KEYS, caller: "no-domains", status: 403 },
  { name: "reads keys in an unknown tenant", method: "GET", path: NO_TENANT_KEYS, status: 404 },
  { name: "revokes a key", method: "DELETE", path: `${KEYS}/oa-1`, status: 200 },
  { name: "revokes a kid too long", method: "DELETE", path: `${KEYS}/${"k".repeat(129)}`, status: 400 },
  { name: "revokes without a token", method: "DELETE", path: `${KEYS}/oa-1`, caller: "none", status: 401 },
  { name: "revokes, no domain", method: "DELETE", path: `${KEYS}/oa-1`, caller: "no-domains", status: 403 },
  { name: "revokes a kid never held", method: "DELETE", path: `${KEYS}/oa-2`, status: 404 },
];

/**
 * The statuses every operation must be seen answering, where the document lists them (500, 503 and an
 * upsert's 409 cannot be caused on purpose).
 */
const MUST_SEE = (status: number) => status < 300 || [304, 400, 401, 403, 404, 412, 413, 415].includes(status);

// The shapes of answers do not depend on the database: SQLite only.
const [sqlite] = testDatabases();
// The prober on (test servers have it off): ProbeAgentDefinition answers its documented statuses only then.
const server = useServer(sqlite!, { PROBE_ENABLED: "true" });

describe("the REST surface answers as its OpenAPI document says", () => {
  const document = committedOpenApi();
  const checker = createOpenApiChecker(document);
  const seen = new Set<string>();
  let definitionId = "";
  let referenceId = "";

  const authorization = async (caller: Caller): Promise<Record<string, string>> => {
    if (caller === "none") return {};
    if (caller === "no-domains") return { authorization: await server().bearer({ domains: [] }) };
    if (caller === "unknown-tenant") return { authorization: await server().bearer({ tenant: "nowhere" }) };
    return { authorization: server().authorization };
  };

  beforeAll(async () => {
    const res = await fetch(`${server().baseUrl}${T}`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify(FIXTURE),
    });
    ({ id: definitionId, reference_id: referenceId } = await res.json());
  });

  it.each([...SCENARIOS, ...KEY_SCENARIOS].map((s) => [`${s.method} ${s.path}: ${s.name}`, s] as const))(
    "%s",
    async (_, scenario) => {
      const path = scenario.path.replace("{id}", definitionId).replace("{reference}", encodeURIComponent(referenceId));
      const payload = scenario.body?.();
      const headers = {
        ...(await authorization(scenario.caller ?? "all")),
        ...(payload?.contentType ? { "content-type": payload.contentType } : {}),
        ...scenario.headers,
      };
      const res = await fetch(`${server().baseUrl}${path}`, {
        method: scenario.method,
        headers,
        ...(payload ? { body: payload.body } : {}),
      });
      const text = await res.text();
      expect(res.status, text).toBe(scenario.status);

      const expected = checker.response(scenario.method, new URL(path, "http://x").pathname, res.status);
      if (res.status === 304) {
        // Not modified: no body, and the document says none.
        expect(text).toBe("");
        expect(expected.validate(undefined)).toBe(true);
      } else {
        expect(res.headers.get("content-type")?.split(";")[0]).toBe(expected.mediaType);
        const body = JSON.parse(text);
        expect(expected.validate(body), JSON.stringify(expected.validate.errors)).toBe(true);
      }
      for (const header of expected.requiredHeaders) expect(res.headers.get(header), header).not.toBeNull();
      seen.add(`${expected.operationId} ${res.status}`);
    },
  );

  it("answers a method a path does not list with 405 and Allow, as the MethodNotAllowed response says", async () => {
    const res = await fetch(`${server().baseUrl}${C}`, {
      method: "DELETE",
      headers: { authorization: server().authorization },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST");
    const validate = checker.componentResponse("MethodNotAllowed");
    expect(validate(await res.json())).toBe(true);
  });

  it.each([
    [`${T}Events`, "/api/asor/v1/{tenant}/agentDefinitionEvents"],
    [`${C}Events`, "/asor/v1/agentDefinitionEvents"],
  ])("GET %s: a 200 that is a text/event-stream, as the document says", async (path, template) => {
    const abort = new AbortController();
    const res = await fetch(`${server().baseUrl}${path}`, {
      headers: { authorization: server().authorization },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const operation = (document.paths as Record<string, any>)[template].get;
    expect(Object.keys(operation.responses["200"].content)).toEqual(["text/event-stream"]);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    // The stream opens with a comment at once.
    const first = await res.body?.getReader().read();
    expect(new TextDecoder().decode(first?.value)).toMatch(/^: /);
    abort.abort();
    seen.add(`${operation.operationId} ${res.status}`);
  });

  // Declared after the table, so it runs after it (a file's tests run in order).
  it("has seen every operation of the document answer each status a client can meet", () => {
    const expected = Object.values(document.paths).flatMap((item: any) =>
      Object.values(item).flatMap((op: any) =>
        Object.keys(op.responses)
          .filter((s) => MUST_SEE(Number(s)))
          .map((s) => `${op.operationId} ${s}`),
      ),
    );
    expect(expected.length).toBeGreaterThan(50);
    expect(expected.filter((e) => !seen.has(e))).toEqual([]);
  });
});

describe("the document's limits and the server's agree", () => {
  const document = committedOpenApi();
  const checker = createOpenApiChecker(document);
  // 63 characters, the most a tenant's name has.
  const tenant = `O${randomBytes(4).toString("hex")}`.padEnd(63, "o");

  beforeAll(async () => {
    const res = await fetch(`${server().baseUrl}${ADMIN}`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: tenant }),
    });
    expect(res.status, await res.text()).toBe(201);
  });

  /**
   * The longest list request the document allows in `tenant`: every parameter at its longest, a page token of
   * 4,096 characters or none.
   */
  const longest = (template: string, pageToken: string): string => {
    const patterned = { tenant, updatedSince: "2000-01-01T00:00:00.123456789+00:00", pageToken };
    const line = longestRequestLine(document, "GET", template, patterned);
    expect(line.length).toBeGreaterThan(pageToken === "" ? 8000 : 12_000);
    return line.replace(/^GET /, "").replace(/ HTTP\/1\.1$/, "");
  };

  it.each(["/api/asor/v1/{tenant}/agentDefinition", "/asor/v1/agentDefinition"])(
    "GET %s: the longest query the document allows is answered by the service, not refused by Node with 431",
    async (template) => {
      const authorization = await server().bearer({ tenant });
      for (const [pageToken, status] of [
        ["", 200],
        ["A".repeat(4096), 400],
      ] as const) {
        const target = longest(template, pageToken);
        const res = await fetch(`${server().baseUrl}${target}`, { headers: { authorization } });
        const text = await res.text();
        expect(res.status, text.slice(0, 300)).toBe(status);
        const expected = checker.response("GET", new URL(target, "http://x").pathname, status);
        expect(expected.validate(JSON.parse(text)), JSON.stringify(expected.validate.errors)).toBe(true);
        // With a page token, the query was read to its end: the token cannot go with offset.
        if (status === 400) expect(JSON.parse(text).errors[0].code).toBe("INVALID_PAGE_TOKEN");
      }
    },
  );

  it("a status the document does not offer is one the service refuses", async () => {
    const validate = checker.requestBody("PATCH", `${C}/${UNKNOWN_ID}/status`, "application/json");
    expect(validate({ status: "DEFINITION_STATUS_UNSPECIFIED" })).toBe(false);
    expect(validate({ status: "DEPRECATED" })).toBe(true);
  });
});

describe("GET /openapi.json", () => {
  it("serves the committed gen/openapi.json byte for byte, without a token", async () => {
    const res = await fetch(`${server().baseUrl}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.text()).toBe(readFileSync("gen/openapi.json", "utf8"));
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const served = await (await fetch(`${server().baseUrl}/openapi.json`)).json();
    expect(served.openapi).toBe("3.1.0");
    expect(await new Validator().validate(served)).toEqual({ valid: true });
  });

  it("answers other methods with 405", async () => {
    const res = await fetch(`${server().baseUrl}/openapi.json`, { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});
