import { describe, expect, it } from "vitest";
import { derivedIds, exampleDefinition, minimalDefinition, withoutReadOnly } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

const HEX32 = /^[0-9a-f]{32}$/;
const TENANT_PATH = "/api/asor/v1/default/agentDefinition";
const CONTRACT_PATH = "/asor/v1/agentDefinition";

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const url = (path: string) => `${server().baseUrl}${path}`;
  /** The request, with the default tenant's all-domains token. */
  const authed = (init: RequestInit = {}): RequestInit => ({
    ...init,
    headers: { authorization: server().authorization, ...(init.headers as Record<string, string>) },
  });
  const get = (path: string) => fetch(url(path), authed());
  const post = (path: string, body: unknown, contentType = "application/json") =>
    fetch(
      url(path),
      authed({
        method: "POST",
        headers: { "content-type": contentType },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    );

  describe("the example definition", () => {
    it("round-trips through POST and GET field for field, plus the read-only fields", async () => {
      const example = exampleDefinition();
      const created = await post(TENANT_PATH, example);
      expect(created.status).toBe(201);
      const body = await created.json();
      expect(body.id).toMatch(HEX32);
      expect(created.headers.get("location")).toBe(`${TENANT_PATH}/${body.id}`);

      const read = await get(`${TENANT_PATH}/${body.id}`);
      expect(read.status).toBe(200);
      const got = await read.json();
      expect(got).toEqual(body);
      expect(withoutReadOnly(got)).toEqual(example);

      expect(got.reference_id).toMatch(/^Agent_ID=AGENT-\d+$/);
      expect(got.provider).toEqual({ id: "Provider=MyOrg", descriptor: "MyOrg" });
      expect(got.platform).toEqual({ id: "Platform=OTHER", reference_id: "OTHER", descriptor: "OTHER" });
      expect(got.hostConfig.map((h: any) => h.executionMode)).toEqual([
        { id: "Mode=Ambient", descriptor: "Ambient" },
        { id: "Mode=Delegate", descriptor: "Delegate" },
      ]);
      const ids = derivedIds(got);
      expect(ids).toHaveLength(12);
      for (const id of ids) expect(id).toMatch(HEX32);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it("gives the same derived ids on every read, and on the contract path", async () => {
      const { id } = await (await post(TENANT_PATH, { ...exampleDefinition(), version: "stable-ids" })).json();
      const first = await (await get(`${TENANT_PATH}/${id}`)).json();
      const second = await (await get(`${CONTRACT_PATH}/${id}`)).json();
      expect(derivedIds(second)).toEqual(derivedIds(first));
    });
  });

  describe("POST", () => {
    it("updates in place when name, provider and version match: same id, one instance, new content", async () => {
      const def = minimalDefinition({ name: "Upsert Agent" });
      const first = await (await post(TENANT_PATH, def)).json();
      const second = await post(CONTRACT_PATH, { ...def, description: "Now does two things" });
      expect(second.status).toBe(201);
      const updated = await second.json();
      expect(updated.id).toBe(first.id);
      const got = await (await get(`${TENANT_PATH}/${first.id}`)).json();
      expect(got.description).toBe("Now does two things");
      const list = await (await get(`${TENANT_PATH}?limit=100`)).json();
      expect(list.data.filter((d: any) => d.name === "Upsert Agent")).toHaveLength(1);
    });

    it("creates a new instance when only the version differs", async () => {
      const def = minimalDefinition({ name: "Versioned Agent" });
      const v1 = await (await post(TENANT_PATH, def)).json();
      const v2 = await (await post(TENANT_PATH, { ...def, version: "2.0.0" })).json();
      expect(v2.id).not.toBe(v1.id);
    });

    it("answers five mistakes with one 400 listing all five, each with code, field and path", async () => {
      const res = await post(TENANT_PATH, {
        ...exampleDefinition(),
        name: "",
        url: "not a url",
        provider: { id: "My Org" },
        defaultInputModes: [{ type: "x".repeat(81) }],
        hostConfig: [{ skillId: "sentiment_analysis", executionMode: { id: "Mode=Sometimes" } }],
      });
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(typeof body.error).toBe("string");
      expect(body.errors.map((e: any) => [e.code, e.field, e.path])).toEqual([
        ["REQUIRED", "name", "name"],
        ["INVALID_URI", "url", "url"],
        ["PATTERN_MISMATCH", "id", "provider.id"],
        ["TOO_LONG", "type", "defaultInputModes[0].type"],
        ["NOT_ALLOWED", "id", "hostConfig[0].executionMode.id"],
      ]);
      for (const e of body.errors) expect(e.error).toContain(e.path);
    });

    it("reports cross-field mistakes: duplicate skill ids and hostConfig naming an unknown skill", async () => {
      const def = minimalDefinition({
        skills: [
          { id: "s1", name: "a", description: "a" },
          { id: "s1", name: "b", description: "b" },
        ],
        hostConfig: [{ skillId: "nope", executionMode: { id: "Mode=Ambient" } }],
      });
      const body = await (await post(TENANT_PATH, def)).json();
      expect(body.errors.map((e: any) => [e.code, e.path])).toEqual([
        ["DUPLICATE_SKILL_ID", "skills[1].id"],
        ["UNKNOWN_SKILL", "hostConfig[0].skillId"],
      ]);
    });

    it("rejects unknown fields by name and path, with a hint for a near miss", async () => {
      const res = await post(TENANT_PATH, {
        ...minimalDefinition(),
        colour: "blue",
        skills: [{ id: "s", name: "n", description: "d", tagz: [] }],
        external_agent_id: "x",
      });
      expect(res.status).toBe(400);
      const body = await res.json();
      // In document order: `skills` keeps the position it has in minimalDefinition().
      expect(body.errors.map((e: any) => [e.code, e.field, e.path])).toEqual([
        ["UNKNOWN_FIELD", "tagz", "skills[0].tagz"],
        ["UNKNOWN_FIELD", "colour", "colour"],
        ["UNKNOWN_FIELD", "external_agent_id", "external_agent_id"],
      ]);
      expect(body.errors[2].error).toContain('Did you mean "externalAgentID"?');
    });

    it("rejects wrongly typed members with their paths", async () => {
      const body = await (
        await post(TENANT_PATH, { ...minimalDefinition(), name: 7, skills: {}, capabilities: { streaming: "yes" } })
      ).json();
      expect(body.errors.map((e: any) => [e.code, e.path])).toEqual([
        ["INVALID_TYPE", "name"],
        ["INVALID_TYPE", "skills"],
        ["INVALID_TYPE", "capabilities.streaming"],
      ]);
    });

    it("rejects malformed JSON with a clear message", async () => {
      const res = await post(TENANT_PATH, '{"name": "x",');
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.errors[0].code).toBe("MALFORMED_JSON");
      expect(body.error).toMatch(/not valid JSON/);
    });

    it("rejects a body that is not an object", async () => {
      const body = await (await post(TENANT_PATH, "[1,2]")).json();
      expect(body.errors[0]).toMatchObject({ code: "INVALID_TYPE" });
      expect(body.errors[0].error).toMatch(/must be a JSON object/);
    });

    it(
      "accepts multipart/form-data with the definition in the part agentCardAndTools, as a field or a " + "file",
      async () => {
        const asField = new FormData();
        asField.set("agentCardAndTools", JSON.stringify(minimalDefinition({ name: "Multipart Field" })));
        const r1 = await fetch(url(TENANT_PATH), authed({ method: "POST", body: asField }));
        expect(r1.status).toBe(201);
        expect((await r1.json()).name).toBe("Multipart Field");

        const asFile = new FormData();
        asFile.set(
          "agentCardAndTools",
          new Blob([JSON.stringify(minimalDefinition({ name: "Multipart File" }))], { type: "application/json" }),
          "agent.json",
        );
        const r2 = await fetch(url(TENANT_PATH), authed({ method: "POST", body: asFile }));
        expect(r2.status).toBe(201);
        expect((await r2.json()).name).toBe("Multipart File");
      },
    );

    it("rejects a multipart body without the part, or with other parts, naming them", async () => {
      const missing = new FormData();
      missing.set("definition", "{}");
      const body = await (await fetch(url(TENANT_PATH), authed({ method: "POST", body: missing }))).json();
      expect(body.errors).toEqual([expect.objectContaining({ code: "UNKNOWN_FIELD", field: "definition" })]);
    });

    it("answers 415 for other media types, in the validation error shape", async () => {
      const res = await post(TENANT_PATH, "name=x", "application/x-www-form-urlencoded");
      expect(res.status).toBe(415);
      const body = await res.json();
      expect(body.errors[0].code).toBe("UNSUPPORTED_MEDIA_TYPE");
    });

    it("answers 415 naming the body each request takes: a definition, a status change, a tenant", async () => {
      const { id } = await (await post(TENANT_PATH, minimalDefinition({ name: "Media types" }))).json();
      const send = (method: string, path: string, body: BodyInit, headers: Record<string, string> = {}) =>
        fetch(url(path), authed({ method, headers, body }));
      const refusals: Array<[string, string, string]> = [
        [
          "POST",
          TENANT_PATH,
          "the body (agentCardAndTools) as application/json, " +
            'or as multipart/form-data with the part "agentCardAndTools"',
        ],
        [
          "PATCH",
          `${TENANT_PATH}/${id}/status`,
          'the body (statusChange) as application/json, or as multipart/form-data with the part "statusChange"',
        ],
        [
          "POST",
          "/asor/v1/admin/tenants",
          'the request body as application/json, or as multipart/form-data with the part "body"',
        ],
      ];
      for (const [method, path, what] of refusals) {
        const res = await send(method, path, "{}", { "content-type": "text/plain" });
        expect(res.status).toBe(415);
        expect((await res.json()).error).toBe(`Send ${what}, not text/plain.`);
      }
      // What the message offers is taken: the status change and the tenant as their multipart parts.
      const status = new FormData();
      status.set("statusChange", JSON.stringify({ status: "DEPRECATED" }));
      expect((await send("PATCH", `${TENANT_PATH}/${id}/status`, status)).status).toBe(200);
      const tenant = new FormData();
      tenant.set("body", JSON.stringify({ name: `media-${id.slice(0, 8)}` }));
      expect((await send("POST", "/asor/v1/admin/tenants", tenant)).status).toBe(201);
    });

    it("answers 413 for a body over the limit, before reading all of it", async () => {
      const huge = JSON.stringify(minimalDefinition({ description: "x".repeat(1024 * 1024) }));
      const res = await post(TENANT_PATH, huge);
      expect(res.status).toBe(413);
      expect((await res.json()).errors[0].code).toBe("PAYLOAD_TOO_LARGE");
    });

    it("answers 404 for a tenant that does not exist", async () => {
      const res = await fetch(url("/api/asor/v1/nobody/agentDefinition"), {
        method: "POST",
        headers: { "content-type": "application/json", authorization: await server().bearer({ tenant: "nobody" }) },
        body: JSON.stringify(minimalDefinition()),
      });
      expect(res.status).toBe(404);
      expect((await res.json()).errors[0]).toMatchObject({ code: "TENANT_NOT_FOUND", field: "tenant" });
    });
  });

  describe("GET", () => {
    it("answers 404 with the validation error body for an unknown id", async () => {
      const res = await get(`${TENANT_PATH}/${"0".repeat(32)}`);
      expect(res.status).toBe(404);
      const body = await res.json();
      expect(body.errors[0]).toMatchObject({ code: "NOT_FOUND", field: "id", path: "id" });
    });

    it("lists {total, data} paged by limit and offset on both paths", async () => {
      for (let i = 0; i < 3; i++) await post(TENANT_PATH, minimalDefinition({ name: `Paged ${i}` }));
      const all = await (await get(`${CONTRACT_PATH}?limit=100`)).json();
      expect(all.total).toBe(all.data.length);
      const page = await (await get(`${TENANT_PATH}?limit=2&offset=1`)).json();
      expect(page.total).toBe(all.total);
      expect(page.data.map((d: any) => d.id)).toEqual(all.data.slice(1, 3).map((d: any) => d.id));
      const beyond = await (await get(`${TENANT_PATH}?offset=100000`)).json();
      expect(beyond).toEqual({ total: all.total, data: [], revision: all.revision });
    });

    it("defaults the page size to 20", async () => {
      for (let i = 0; i < 21; i++) await post(TENANT_PATH, minimalDefinition({ name: `Default page ${i}` }));
      const page = await (await get(TENANT_PATH)).json();
      expect(page.data).toHaveLength(20);
      expect(page.total).toBeGreaterThan(20);
    });

    it("rejects a limit above 100, a negative offset and unknown query parameters", async () => {
      const body = await (await get(`${TENANT_PATH}?limit=101&offset=-1&sort=name`)).json();
      expect(body.errors.map((e: any) => [e.code, e.path])).toEqual([["UNKNOWN_FIELD", "sort"]]);
      const range = await (await get(`${TENANT_PATH}?limit=101&offset=-1`)).json();
      expect(range.errors.map((e: any) => [e.code, e.path])).toEqual([
        ["OUT_OF_RANGE", "limit"],
        ["OUT_OF_RANGE", "offset"],
      ]);
    });

    it("answers 405 with Allow for a wrong method, and 404 for a path outside the surface", async () => {
      const wrong = await fetch(url(`${TENANT_PATH}/abc`), authed({ method: "DELETE" }));
      expect(wrong.status).toBe(405);
      // {id} is read with GET and replaced with PUT (issue 11).
      expect(wrong.headers.get("allow")).toBe("GET, PUT");
      const nowhere = await get("/nowhere");
      expect(nowhere.status).toBe(404);
      expect((await nowhere.json()).errors[0].code).toBe("NOT_FOUND");
    });
  });
});
