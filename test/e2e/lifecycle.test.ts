/**
 * Issue 11, items 1-4, end to end on a real server over REST and gRPC
 * (@grpc/grpc-js): `meta` on every answer, ETags and conditional requests,
 * PUT by id, and the status lifecycle (PATCH .../status), with its effect on
 * `Agent_ID=` references and on the list.
 */
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type AgentDefinition,
  AgentDefinitionSchema,
  DefinitionStatus,
} from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  SetAgentDefinitionStatusRequestSchema,
  type SetAgentDefinitionStatusResponse,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { postConnectJson } from "../support/connect-json.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

/** RFC 3339, UTC, milliseconds. */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: any;
}

forEachDatabase((db) => {
  const server = useServer(db);
  const base = () => `${server().baseUrl}/asor/v1/agentDefinition`;

  const call = async (
    method: string,
    path: string,
    init: { body?: unknown; headers?: Record<string, string>; domains?: string[] } = {},
  ): Promise<Answer> => {
    const authorization = await server().bearer(init.domains === undefined ? {} : { domains: init.domains });
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: {
        authorization,
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text === "" ? undefined : JSON.parse(text) };
  };
  const post = (def: unknown, headers: Record<string, string> = {}) => call("POST", "", { body: def, headers });
  const put = (id: string, def: unknown, headers: Record<string, string> = {}) =>
    call("PUT", `/${encodeURIComponent(id)}`, { body: def, headers });
  const patch = (id: string, change: unknown, headers: Record<string, string> = {}) =>
    call("PATCH", `/${encodeURIComponent(id)}/status`, { body: change, headers });
  const get = (id: string, headers: Record<string, string> = {}) =>
    call("GET", `/${encodeURIComponent(id)}`, { headers });
  const list = async () => (await call("GET", "?limit=100")).body as { total: number; data: any[] };
  const listedIds = async () => (await list()).data.map((d) => d.id as string);

  /** A definition of its own agent, unique to the test. */
  let counter = 0;
  const fresh = (overrides: Record<string, unknown> = {}) =>
    minimalDefinition({ name: `Lifecycle ${db.name} ${++counter}`, ...overrides });

  describe("meta", () => {
    it("comes with a created definition: revision 1, ACTIVE, latest, three equal instants, and the ETag", async () => {
      const created = await post(fresh());
      expect(created.status).toBe(201);
      const meta = created.body.meta;
      expect(meta).toEqual({
        createdAt: expect.stringMatching(INSTANT),
        updatedAt: meta.createdAt,
        statusChangedAt: meta.createdAt,
        revision: 1,
        status: "ACTIVE",
        latest: true,
        etag: `"${created.body.id}-1"`,
        // The tenant revision its create took (an int64: a string).
        modRevision: expect.stringMatching(/^[1-9][0-9]*$/),
        // Registering never probes in the request (issue 44): the prober decides later.
        liveness: { state: "NOT_PROBED" },
      });
      expect(created.headers.get("etag")).toBe(meta.etag);
      // And it is the last member, after the stored document's own.
      expect(Object.keys(created.body).at(-1)).toBe("meta");
    });

    it("comes with every definition of GET, the list and the versions list", async () => {
      const first = (await post(fresh({ version: "1" }))).body;
      const second = (await post({ ...first, id: first.reference_id, version: "2" })).body;
      const read = await get(first.id);
      // The first version is no longer its agent's latest; nothing else about it changed but the tenant
      // revision that last changed it (the flag's move took one of its own, before the second version's).
      expect(read.body.meta).toEqual({
        ...first.meta,
        latest: false,
        modRevision: String(Number(second.meta.modRevision) - 1),
      });
      expect(read.headers.get("etag")).toBe(first.meta.etag);
      const byReference = await get(first.reference_id);
      expect(byReference.body.id).toBe(second.id);
      expect(byReference.body.meta).toMatchObject({ latest: true, revision: 1 });
      const listed = await list();
      expect(listed.data.length).toBeGreaterThan(0);
      for (const item of listed.data)
        expect(item.meta).toEqual(
          expect.objectContaining({
            revision: expect.any(Number),
            status: expect.any(String),
            etag: expect.any(String),
          }),
        );
      const versions = (await call("GET", `/${encodeURIComponent(first.reference_id)}/versions`)).body;
      expect(versions.data.map((d: any) => [d.id, d.meta.latest])).toEqual([
        [second.id, true],
        [first.id, false],
      ]);
      // A list answer is about many definitions: no ETag.
      expect((await call("GET", "")).headers.get("etag")).toBeNull();
    });

    it("sent back on input is accepted and ignored", async () => {
      const created = (await post(fresh())).body;
      const forged = {
        ...created,
        description: "Changed",
        meta: { ...created.meta, revision: 99, status: "DEACTIVATED", statusMessage: "forged", latest: false },
      };
      const again = await post(forged);
      expect(again.status).toBe(201);
      expect(again.body.description).toBe("Changed");
      expect(again.body.meta).toMatchObject({ revision: 2, status: "ACTIVE", latest: true });
      expect(again.body.meta.statusMessage).toBeUndefined();
    });
  });

  describe("revision", () => {
    it("does not move when the same content is sent again: POST and PUT of what is stored change nothing", async () => {
      const def = fresh();
      const created = (await post(def)).body;
      const again = await post(def);
      expect(again.status).toBe(201);
      expect(again.body.meta).toEqual(created.meta);
      expect(again.headers.get("etag")).toBe(created.meta.etag);
      const put1 = await put(created.id, created, { "if-match": created.meta.etag });
      expect(put1.status).toBe(200);
      expect(put1.body.meta).toEqual(created.meta);
      // A change of one character is a change.
      const changed = await post({ ...def, description: `${def.description}.` });
      expect(changed.body.meta).toMatchObject({ revision: 2, createdAt: created.meta.createdAt });
      expect(changed.body.meta.etag).not.toBe(created.meta.etag);
    });
  });

  describe("conditional GET", () => {
    it("answers 304 without a body when If-None-Match names the current ETag, 200 otherwise", async () => {
      const created = (await post(fresh())).body;
      const etag = created.meta.etag as string;
      for (const condition of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
        const notModified = await get(created.id, { "if-none-match": condition });
        expect(notModified.status, condition).toBe(304);
        expect(notModified.text).toBe("");
        expect(notModified.headers.get("etag")).toBe(etag);
      }
      const stale = await get(created.id, { "if-none-match": `"${created.id}-0"` });
      expect(stale.status).toBe(200);
      expect(stale.body.meta.etag).toBe(etag);
    });

    it("answers 200 again once the definition changed", async () => {
      const created = (await post(fresh())).body;
      await post({ ...created, description: "Changed" });
      const read = await get(created.id, { "if-none-match": created.meta.etag });
      expect(read.status).toBe(200);
      expect(read.body.meta.revision).toBe(2);
      expect(read.headers.get("etag")).toBe(`"${created.id}-2"`);
    });
  });

  describe("PUT by id", () => {
    it("replaces the content, raises the revision and updatedAt, keeps createdAt and the status", async () => {
      const created = (await post(fresh({ description: "Before" }))).body;
      const updated = await put(created.id, { ...created, description: "After", id: undefined });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({ id: created.id, reference_id: created.reference_id, description: "After" });
      expect(updated.body.meta).toMatchObject({
        revision: 2,
        status: "ACTIVE",
        createdAt: created.meta.createdAt,
        statusChangedAt: created.meta.statusChangedAt,
        latest: true,
      });
      expect(Date.parse(updated.body.meta.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.meta.updatedAt));
      expect(updated.headers.get("etag")).toBe(`"${created.id}-2"`);
      expect(updated.headers.get("location")).toBeNull();
      expect((await get(created.id)).body).toEqual(updated.body);
    });

    it(
      "with a current If-Match writes; with a stale one answers 412 PRECONDITION_FAILED and writes " + "nothing",
      async () => {
        const created = (await post(fresh())).body;
        const ok = await put(created.id, { ...created, description: "One" }, { "if-match": created.meta.etag });
        expect(ok.status).toBe(200);
        const stale = await put(created.id, { ...created, description: "Two" }, { "if-match": created.meta.etag });
        expect(stale.status).toBe(412);
        expect(stale.body.errors).toEqual([expect.objectContaining({ code: "PRECONDITION_FAILED", field: "etag" })]);
        const read = (await get(created.id)).body;
        expect(read.description).toBe("One");
        expect(read.meta.revision).toBe(2);
      },
    );

    it("lets exactly one of two racing PUTs with the same If-Match win", async () => {
      const created = (await post(fresh())).body;
      let etag = created.meta.etag as string;
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all(
          ["A", "B"].map((who) =>
            put(created.id, { ...created, description: `${who} ${round}` }, { "if-match": etag }),
          ),
        );
        expect(answers.map((a) => a.status).sort()).toEqual([200, 412]);
        const winner = answers.find((a) => a.status === 200) as Answer;
        const read = (await get(created.id)).body;
        expect(read.description).toBe(winner.body.description);
        expect(read.meta.revision).toBe(round + 2);
        etag = read.meta.etag;
      }
    });

    it("refuses to change the key with 400 KEY_CHANGED naming each member", async () => {
      const created = (await post(fresh())).body;
      const one = await put(created.id, { ...created, version: "9.9" });
      expect(one.status).toBe(400);
      expect(one.body.errors).toEqual([
        expect.objectContaining({ code: "KEY_CHANGED", field: "version", path: "version" }),
      ]);
      const all = await put(created.id, {
        ...created,
        name: "Other",
        version: "9.9",
        provider: { id: "Provider=Other" },
      });
      expect(all.body.errors.map((e: any) => [e.code, e.path])).toEqual([
        ["KEY_CHANGED", "name"],
        ["KEY_CHANGED", "provider.id"],
        ["KEY_CHANGED", "version"],
      ]);
      expect((await get(created.id)).body.meta.revision).toBe(1);
    });

    it("answers 404 for an unknown id, 400 for an id that is not a version's", async () => {
      const unknown = await put("0123456789abcdef0123456789abcdef", fresh());
      expect(unknown.status).toBe(404);
      expect(unknown.body.errors).toEqual([expect.objectContaining({ code: "NOT_FOUND", field: "id" })]);
      const reference = await put("Agent_ID=AGENT-1", fresh());
      expect(reference.status).toBe(400);
      expect(reference.body.errors).toEqual([expect.objectContaining({ field: "id" })]);
    });

    it("takes multipart/form-data as POST does", async () => {
      const created = (await post(fresh())).body;
      const form = new FormData();
      form.set("agentCardAndTools", JSON.stringify({ ...created, description: "From a form" }));
      const res = await fetch(`${base()}/${created.id}`, {
        method: "PUT",
        headers: { authorization: await server().bearer() },
        body: form,
      });
      expect(res.status).toBe(200);
      expect((await res.json()).description).toBe("From a form");
    });
  });

  describe("conditional POST", () => {
    it("If-Match: updates when it names the key's current version, else 412 and nothing written", async () => {
      const created = (await post(fresh())).body;
      const stale = await post({ ...created, description: "Stale" }, { "if-match": `"${created.id}-7"` });
      expect(stale.status).toBe(412);
      expect(stale.body.errors[0]).toMatchObject({ code: "PRECONDITION_FAILED" });
      expect((await get(created.id)).body).toMatchObject({ description: created.description, meta: { revision: 1 } });
      const ok = await post({ ...created, description: "Fresh" }, { "if-match": created.meta.etag });
      expect(ok.status).toBe(201);
      expect(ok.body.meta.revision).toBe(2);
      // No current version: If-Match cannot hold, and nothing is created.
      const absent = fresh();
      expect((await post(absent, { "if-match": "*" })).status).toBe(412);
      expect(await listedIds()).not.toContain(undefined);
      expect((await list()).data.some((d) => d.name === absent.name)).toBe(false);
    });

    it("If-None-Match: * creates only: 201 for a new key, 412 for an existing one", async () => {
      const def = fresh();
      const created = await post(def, { "if-none-match": "*" });
      expect(created.status).toBe(201);
      const again = await post({ ...def, description: "Again" }, { "if-none-match": "*" });
      expect(again.status).toBe(412);
      expect(again.body.errors[0]).toMatchObject({ code: "PRECONDITION_FAILED" });
      expect((await get(created.body.id)).body).toMatchObject({ description: def.description, meta: { revision: 1 } });
      const other = await post(def, { "if-none-match": created.body.meta.etag });
      expect(other.status).toBe(400);
      expect(other.body.errors[0]).toMatchObject({ code: "INVALID_VALUE", field: "If-None-Match" });
    });

    it("takes the conditions only from the headers, not from query parameters", async () => {
      const res = await call("POST", "?etag=x", { body: fresh() });
      expect(res.status).toBe(400);
      expect(res.body.errors[0]).toMatchObject({ code: "UNKNOWN_FIELD", field: "etag" });
    });
  });

  describe("strict conditions", () => {
    it(
      "answers 400 to a present but empty If-Match on POST, PUT and PATCH (a client's unset variable), and writes " +
        "nothing",
      async () => {
        const created = (await post(fresh())).body;
        for (const empty of ["", " ", " , "]) {
          const answers = [
            await post({ ...created, description: "Unconditional?" }, { "if-match": empty }),
            await put(created.id, { ...created, description: "Unconditional?" }, { "if-match": empty }),
            await patch(created.id, { status: "DEPRECATED" }, { "if-match": empty }),
          ];
          for (const answer of answers) {
            expect(answer.status, answer.text).toBe(400);
            expect(answer.body.errors).toEqual([expect.objectContaining({ code: "INVALID_VALUE", field: "If-Match" })]);
          }
        }
        expect((await get(created.id)).body.meta.etag).toBe(created.meta.etag);
      },
    );

    it(
      "answers 400 to If-None-Match on PUT and PATCH, * or a tag, as on a POST with anything but *, and writes " +
        "nothing",
      async () => {
        const created = (await post(fresh())).body;
        for (const value of ["*", created.meta.etag]) {
          for (const answer of [
            await put(created.id, { ...created, description: "Changed" }, { "if-none-match": value }),
            await patch(created.id, { status: "DEPRECATED" }, { "if-none-match": value }),
          ]) {
            expect(answer.status, answer.text).toBe(400);
            expect(answer.body.errors).toEqual([
              expect.objectContaining({ code: "INVALID_VALUE", field: "If-None-Match" }),
            ]);
          }
        }
        expect(
          (await post({ ...created, description: "Changed" }, { "if-none-match": created.meta.etag })).status,
        ).toBe(400);
        expect((await get(created.id)).body.meta.etag).toBe(created.meta.etag);
      },
    );

    it("still reads a GET's If-None-Match for 304 and ignores its If-Match", async () => {
      const created = (await post(fresh())).body;
      expect((await get(created.id, { "if-none-match": created.meta.etag })).status).toBe(304);
      expect((await get(created.id, { "if-match": "" })).status).toBe(200);
    });
  });

  describe("status", () => {
    /** An agent with three versions, oldest first. */
    const agentOfThree = async () => {
      const v1 = (await post(fresh({ version: "1" }))).body;
      const v2 = (await post({ ...v1, id: v1.reference_id, version: "2" })).body;
      const v3 = (await post({ ...v1, id: v1.reference_id, version: "3" })).body;
      return [v1, v2, v3] as const;
    };

    it(
      "PATCH by id sets one version's status and message, raising its revision; answers it with its " + "ETag",
      async () => {
        const created = (await post(fresh())).body;
        const set = await patch(created.id, { status: "DEPRECATED", statusMessage: "Use v2" });
        expect(set.status).toBe(200);
        expect(set.body.id).toBe(created.id);
        expect(set.body.meta).toMatchObject({
          status: "DEPRECATED",
          statusMessage: "Use v2",
          revision: 2,
          latest: true,
          createdAt: created.meta.createdAt,
        });
        expect(Date.parse(set.body.meta.statusChangedAt)).toBeGreaterThanOrEqual(
          Date.parse(created.meta.statusChangedAt),
        );
        expect(set.body.meta.updatedAt).toBe(set.body.meta.statusChangedAt);
        expect(set.headers.get("etag")).toBe(`"${created.id}-2"`);
        // Deprecated versions stay listed; a later change without a message drops the old one.
        expect(await listedIds()).toContain(created.id);
        const back = await patch(created.id, { status: "ACTIVE" });
        expect(back.body.meta).toMatchObject({ status: "ACTIVE", revision: 3 });
        expect(back.body.meta.statusMessage).toBeUndefined();
      },
    );

    it("PATCH with a stale If-Match answers 412 and sets nothing", async () => {
      const created = (await post(fresh())).body;
      await post({ ...created, description: "Changed" });
      const stale = await patch(created.id, { status: "DEACTIVATED" }, { "if-match": created.meta.etag });
      expect(stale.status).toBe(412);
      expect((await get(created.id)).body.meta).toMatchObject({ status: "ACTIVE", revision: 2 });
      const ok = await patch(created.id, { status: "DEACTIVATED" }, { "if-match": `"${created.id}-2"` });
      expect(ok.status).toBe(200);
    });

    it("a DEACTIVATED version leaves the list, stays readable by id, and Agent_ID= resolves past it", async () => {
      const [v1, v2, v3] = await agentOfThree();
      const set = await patch(v3.id, { status: "DEACTIVATED", statusMessage: "Broken" });
      expect(set.body.meta).toMatchObject({ status: "DEACTIVATED", latest: false });
      expect(await listedIds()).not.toContain(v3.id);
      expect(await listedIds()).toEqual(expect.arrayContaining([v1.id, v2.id]));
      const read = await get(v3.id);
      expect(read.status).toBe(200);
      expect(read.body.meta).toMatchObject({ status: "DEACTIVATED", statusMessage: "Broken", latest: false });
      const byReference = await get(v1.reference_id);
      expect(byReference.body.id).toBe(v2.id);
      expect(byReference.body.meta.latest).toBe(true);
      // The versions list still shows every version, each with its status.
      const versions = (await call("GET", `/${encodeURIComponent(v1.reference_id)}/versions`)).body;
      expect(versions.data.map((d: any) => [d.id, d.meta.status, d.meta.latest])).toEqual([
        [v3.id, "DEACTIVATED", false],
        [v2.id, "ACTIVE", true],
        [v1.id, "ACTIVE", false],
      ]);
    });

    it(
      "PATCH by Agent_ID= sets every version in one go and answers {total, data}; the reference then names the " +
        "newest of all",
      async () => {
        const [v1, v2, v3] = await agentOfThree();
        const set = await patch(v1.reference_id, { status: "DEACTIVATED", statusMessage: "Retired" });
        expect(set.status).toBe(200);
        expect(set.headers.get("etag")).toBeNull();
        expect(set.body.total).toBe(3);
        expect(
          set.body.data.map((d: any) => [d.id, d.meta.status, d.meta.statusMessage, d.meta.revision, d.meta.latest]),
        ).toEqual([
          [v3.id, "DEACTIVATED", "Retired", 2, false],
          [v2.id, "DEACTIVATED", "Retired", 2, false],
          [v1.id, "DEACTIVATED", "Retired", 2, false],
        ]);
        const listed = await listedIds();
        for (const v of [v1, v2, v3]) expect(listed).not.toContain(v.id);
        const byReference = await get(v1.reference_id);
        expect(byReference.body.id).toBe(v3.id);
        expect(byReference.body.meta.status).toBe("DEACTIVATED");
        // Reactivating the oldest makes it the one the reference names.
        await patch(v1.id, { status: "ACTIVE" });
        const after = await get(v1.reference_id);
        expect(after.body.id).toBe(v1.id);
        expect(after.body.meta).toMatchObject({ status: "ACTIVE", latest: true, revision: 3 });
      },
    );

    it(
      "a POST to a deactivated version's key updates its content and keeps its status; a new version becomes " +
        "latest",
      async () => {
        const [v1, v2] = await agentOfThree();
        await patch(v1.reference_id, { status: "DEACTIVATED" });
        const updated = await post({ ...v2, description: "Patched while off" });
        expect(updated.status).toBe(201);
        expect(updated.body.id).toBe(v2.id);
        expect(updated.body.meta).toMatchObject({ status: "DEACTIVATED", revision: 3, latest: false });
        expect(await listedIds()).not.toContain(v2.id);
        const v4 = (await post({ ...v1, id: v1.reference_id, version: "4" })).body;
        expect(v4.meta).toMatchObject({ status: "ACTIVE", latest: true });
        expect((await get(v1.reference_id)).body.id).toBe(v4.id);
      },
    );

    describe("deactivation is a control: Development cannot undo it", () => {
      const DEVELOPMENT = ["Development"];
      const SETUP = ["Setup: Agents"];

      it(
        "refuses a new version of an agent whose versions are all DEACTIVATED (by name and by id) to Development, " +
          "403 AGENT_DEACTIVATED; Setup: Agents may",
        async () => {
          const [v1] = await agentOfThree();
          await patch(v1.reference_id, { status: "DEACTIVATED" });
          const byName = await call("POST", "", { body: { ...v1, id: undefined, version: "4" }, domains: DEVELOPMENT });
          expect(byName.status).toBe(403);
          expect(byName.body).toMatchObject({ errors: [expect.objectContaining({ code: "AGENT_DEACTIVATED" })] });
          const byReference = await call("POST", "", {
            body: { ...v1, id: v1.reference_id, version: "4" },
            domains: DEVELOPMENT,
          });
          expect(byReference.status).toBe(403);
          // Nothing was written: the agent is still off, its card still withdrawn.
          expect((await get(v1.reference_id)).body.meta).toMatchObject({ status: "DEACTIVATED", latest: false });
          expect((await call("GET", `/${encodeURIComponent(v1.reference_id)}/versions`)).body.total).toBe(3);
          const revived = await call("POST", "", {
            body: { ...v1, id: v1.reference_id, version: "4" },
            domains: SETUP,
          });
          expect(revived.status).toBe(201);
          expect(revived.body.meta).toMatchObject({ status: "ACTIVE", latest: true });
        },
      );

      it("admits Development's new version while one version of the agent is not DEACTIVATED", async () => {
        const [v1, , v3] = await agentOfThree();
        await patch(v3.id, { status: "DEACTIVATED" });
        const added = await call("POST", "", {
          body: { ...v1, id: v1.reference_id, version: "4" },
          domains: DEVELOPMENT,
        });
        expect(added.status).toBe(201);
      });

      it(
        "refuses Development a PUT or a POST to the key of a DEACTIVATED version, and writes nothing; Setup: " +
          "Agents may",
        async () => {
          const [v1, v2] = await agentOfThree();
          const off = (await patch(v2.id, { status: "DEACTIVATED" })).body;
          const put = await call("PUT", `/${v2.id}`, {
            body: { ...v2, description: "Sneaked in" },
            domains: DEVELOPMENT,
          });
          expect(put.status).toBe(403);
          expect(put.body).toMatchObject({ errors: [expect.objectContaining({ code: "AGENT_DEACTIVATED" })] });
          const posted = await call("POST", "", { body: { ...v2, description: "Sneaked in" }, domains: DEVELOPMENT });
          expect(posted.status).toBe(403);
          expect((await get(v2.id)).body.meta.etag).toBe(off.meta.etag);
          // An ACTIVE version of the same agent stays Development's to change.
          expect(
            (await call("PUT", `/${v1.id}`, { body: { ...v1, description: "Fine" }, domains: DEVELOPMENT })).status,
          ).toBe(200);
          const setup = await call("PUT", `/${v2.id}`, { body: { ...v2, description: "By Setup" }, domains: SETUP });
          expect(setup.status).toBe(200);
          expect(setup.body).toMatchObject({ description: "By Setup", meta: { status: "DEACTIVATED" } });
        },
      );
    });

    it("needs Setup: Agents; Development alone is refused", async () => {
      const created = (await post(fresh())).body;
      const refused = await call("PATCH", `/${created.id}/status`, {
        body: { status: "DEPRECATED" },
        domains: ["Development"],
      });
      expect(refused.status).toBe(403);
      expect((await call("PUT", `/${created.id}`, { body: created, domains: ["Development"] })).status).toBe(200);
    });

    it("answers 404 for an unknown id or agent, 400 for a missing or unknown status", async () => {
      expect((await patch("0123456789abcdef0123456789abcdef", { status: "ACTIVE" })).status).toBe(404);
      expect((await patch("Agent_ID=AGENT-999999", { status: "ACTIVE" })).status).toBe(404);
      const created = (await post(fresh())).body;
      const missing = await patch(created.id, {});
      expect(missing.status).toBe(400);
      expect(missing.body.errors[0]).toMatchObject({ field: "status" });
      const unknown = await patch(created.id, { status: "RETIRED" });
      expect(unknown.status).toBe(400);
      expect(unknown.body.errors[0]).toMatchObject({ field: "status" });
    });
  });

  describe("over Connect JSON", () => {
    it("answers meta and the ETag header as REST does, and takes etag and statusChange as JSON", async () => {
      const authorization = await server().bearer();
      const rpc = (name: string, body: unknown) =>
        postConnectJson(
          server().baseUrl,
          authorization,
          `asor.v1.AgentDefinitionService/${name}`,
          JSON.stringify(body),
        );
      const def = fresh();
      const created = await rpc("UpsertAgentDefinition", { agentCardAndTools: def, createOnly: true });
      expect(created.status).toBe(200);
      expect(created.body.meta).toMatchObject({
        revision: 1,
        status: "ACTIVE",
        latest: true,
        etag: `"${created.body.id}-1"`,
      });
      // The same meta as REST's answer for the same version.
      expect((await get(created.body.id)).body.meta).toEqual(created.body.meta);
      const res = await fetch(`${server().baseUrl}/asor.v1.AgentDefinitionService/GetAgentDefinition`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1", authorization },
        body: JSON.stringify({ id: created.body.id }),
      });
      expect(res.headers.get("etag")).toBe(created.body.meta.etag);
      const stale = await rpc("SetAgentDefinitionStatus", {
        id: created.body.id,
        statusChange: { status: "DEPRECATED" },
        etag: `"${created.body.id}-9"`,
      });
      expect(stale.status).toBe(400);
      expect(stale.body.code).toBe("failed_precondition");
      expect(stale.validation?.errors?.[0]).toMatchObject({ code: "PRECONDITION_FAILED", field: "etag" });
      const set = await rpc("SetAgentDefinitionStatus", {
        id: created.body.id,
        statusChange: { status: "DEPRECATED", statusMessage: "Soon" },
        etag: created.body.meta.etag,
      });
      expect(set.status).toBe(200);
      expect(set.body).toMatchObject({
        total: 1,
        data: [{ id: created.body.id, meta: { status: "DEPRECATED", statusMessage: "Soon", revision: 2 } }],
      });
    });
  });

  describe("over gRPC", () => {
    let client: ReturnType<typeof createGrpcJsClient>;
    beforeAll(async () => {
      client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, await server().bearer());
      return () => client.close();
    });
    const upsert = (def: Record<string, unknown>, conditions: { etag?: string; createOnly?: boolean } = {}) =>
      client.call(
        "upsertAgentDefinition",
        create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definitionOf(def), ...conditions }),
        AgentDefinitionSchema,
      );
    const failure = async (promise: Promise<unknown>) => {
      const err = (await promise.then(
        () => undefined,
        (e: unknown) => e,
      )) as ServiceError | undefined;
      if (err === undefined) throw new Error("expected the call to fail");
      const [detail] = grpcErrorDetails(err);
      return { code: err.code, errors: (toJson(ValidationErrorSchema, detail as never) as { errors: any[] }).errors };
    };

    it("answers meta in binary on upsert, get, list and versions", async () => {
      const created = await upsert(fresh());
      expect(created.meta).toMatchObject({
        revision: 1,
        status: DefinitionStatus.ACTIVE,
        latest: true,
        etag: `"${created.id}-1"`,
      });
      expect(created.meta?.createdAt).toMatch(INSTANT);
      const read = await client.call(
        "getAgentDefinition",
        create(GetAgentDefinitionRequestSchema, { id: created.id }),
        AgentDefinitionSchema,
      );
      expect(read.meta).toEqual(created.meta);
      const listed = await client.call(
        "listAgentDefinitions",
        create(ListAgentDefinitionsRequestSchema, { limit: 100 }),
      );
      const listedData = (listed as unknown as { data: AgentDefinition[] }).data;
      expect(listedData.map((d) => d.id)).toContain(created.id);
      expect(listedData.every((d) => d.meta !== undefined && d.meta.revision >= 1)).toBe(true);
      const versions = await client.call(
        "listAgentDefinitionVersions",
        create(ListAgentDefinitionVersionsRequestSchema, { id: created.id }),
      );
      expect((versions as unknown as { data: AgentDefinition[] }).data[0]?.meta?.etag).toBe(created.meta?.etag);
    });

    it("applies etag and createOnly as REST applies If-Match and If-None-Match: *", async () => {
      const def = fresh();
      const created = await upsert(def, { createOnly: true });
      const again = await failure(upsert(def, { createOnly: true }));
      expect(again.code).toBe(grpcStatus.FAILED_PRECONDITION);
      expect(again.errors[0]).toMatchObject({ code: "PRECONDITION_FAILED" });
      const stale = await failure(upsert({ ...def, description: "x" }, { etag: `"${created.id}-5"` }));
      expect(stale.code).toBe(grpcStatus.FAILED_PRECONDITION);
      // An etag without its quotes is taken as the quoted one.
      const ok = await upsert({ ...def, description: "y" }, { etag: `${created.id}-1` });
      expect(ok.meta?.revision).toBe(2);
    });

    it("answers INVALID_ARGUMENT to an etag that names no tag, as REST answers an empty If-Match", async () => {
      const def = fresh();
      const created = await upsert(def);
      const blank = await failure(upsert({ ...def, description: "x" }, { etag: " , " }));
      expect(blank.code).toBe(grpcStatus.INVALID_ARGUMENT);
      expect(blank.errors[0]).toMatchObject({ code: "INVALID_VALUE", field: "etag" });
      const update = client.call(
        "updateAgentDefinition",
        create(UpdateAgentDefinitionRequestSchema, { id: created.id, agentCardAndTools: definitionOf(def), etag: " " }),
      );
      expect((await failure(update)).code).toBe(grpcStatus.INVALID_ARGUMENT);
      const status = client.call(
        "setAgentDefinitionStatus",
        create(SetAgentDefinitionStatusRequestSchema, {
          id: created.id,
          statusChange: { status: DefinitionStatus.DEPRECATED },
          etag: ",",
        }),
      );
      expect((await failure(status)).code).toBe(grpcStatus.INVALID_ARGUMENT);
    });

    it("updates by id, with KEY_CHANGED, NOT_FOUND and FAILED_PRECONDITION as over REST", async () => {
      const def = fresh();
      const created = await upsert(def);
      const update = (id: string, body: Record<string, unknown>, etag = "") =>
        client.call(
          "updateAgentDefinition",
          create(UpdateAgentDefinitionRequestSchema, { id, agentCardAndTools: definitionOf(body), etag }),
          AgentDefinitionSchema,
        );
      const updated = await update(created.id, { ...def, description: "Via gRPC" }, created.meta?.etag);
      expect(updated).toMatchObject({ id: created.id, description: "Via gRPC", meta: { revision: 2 } });
      const stale = await failure(update(created.id, def, created.meta?.etag));
      expect(stale.code).toBe(grpcStatus.FAILED_PRECONDITION);
      const changed = await failure(update(created.id, { ...def, name: "Renamed" }));
      expect(changed.code).toBe(grpcStatus.INVALID_ARGUMENT);
      expect(changed.errors[0]).toMatchObject({ code: "KEY_CHANGED", field: "name" });
      const unknown = await failure(update("0123456789abcdef0123456789abcdef", def));
      expect(unknown.code).toBe(grpcStatus.NOT_FOUND);
    });

    it("lets exactly one of two racing updates with the same etag win", async () => {
      const def = fresh();
      const created = await upsert(def);
      const results = await Promise.allSettled(
        ["A", "B"].map((who) =>
          client.call(
            "updateAgentDefinition",
            create(UpdateAgentDefinitionRequestSchema, {
              id: created.id,
              agentCardAndTools: definitionOf({ ...def, description: who }),
              etag: created.meta?.etag ?? "",
            }),
          ),
        ),
      );
      expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
      const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect((rejected.reason as ServiceError).code).toBe(grpcStatus.FAILED_PRECONDITION);
    });

    it("sets the status of every version of an agent and answers them all", async () => {
      const first = await upsert(fresh({ version: "1" }));
      const second = await upsert({ ...minimalDefinition({ name: first.name, version: "2" }), id: first.referenceId });
      const set = (await client.call(
        "setAgentDefinitionStatus",
        create(SetAgentDefinitionStatusRequestSchema, {
          id: first.referenceId,
          statusChange: { status: DefinitionStatus.DEPRECATED, statusMessage: "Old" },
        }),
      )) as SetAgentDefinitionStatusResponse;
      expect(set.total).toBe(2);
      expect(set.data.map((d) => [d.id, d.meta?.status, d.meta?.statusMessage, d.meta?.latest])).toEqual([
        [second.id, DefinitionStatus.DEPRECATED, "Old", true],
        [first.id, DefinitionStatus.DEPRECATED, "Old", false],
      ]);
      const one = (await client.call(
        "setAgentDefinitionStatus",
        create(SetAgentDefinitionStatusRequestSchema, {
          id: second.id,
          statusChange: { status: DefinitionStatus.DEACTIVATED },
        }),
      )) as SetAgentDefinitionStatusResponse;
      expect(one.total).toBe(1);
      expect(one.data[0]?.meta).toMatchObject({ status: DefinitionStatus.DEACTIVATED, latest: false, revision: 3 });
      const byReference = await client.call(
        "getAgentDefinition",
        create(GetAgentDefinitionRequestSchema, { id: first.referenceId }),
        AgentDefinitionSchema,
      );
      expect(byReference.id).toBe(first.id);
      // A stale etag sets nothing; an etag with an Agent_ID= is refused (it names one revision of one version).
      const stale = await failure(
        client.call(
          "setAgentDefinitionStatus",
          create(SetAgentDefinitionStatusRequestSchema, {
            id: first.id,
            statusChange: { status: DefinitionStatus.ACTIVE },
            etag: first.meta?.etag ?? "",
          }),
        ),
      );
      expect(stale.code).toBe(grpcStatus.FAILED_PRECONDITION);
      expect(stale.errors[0]).toMatchObject({ code: "PRECONDITION_FAILED", field: "etag" });
      const forAgent = await failure(
        client.call(
          "setAgentDefinitionStatus",
          create(SetAgentDefinitionStatusRequestSchema, {
            id: first.referenceId,
            statusChange: { status: DefinitionStatus.ACTIVE },
            etag: "*",
          }),
        ),
      );
      expect(forAgent.code).toBe(grpcStatus.INVALID_ARGUMENT);
      expect(forAgent.errors[0]).toMatchObject({ field: "etag" });
      const unset = await failure(
        client.call(
          "setAgentDefinitionStatus",
          create(SetAgentDefinitionStatusRequestSchema, {
            id: second.id,
            statusChange: { status: DefinitionStatus.DEFINITION_STATUS_UNSPECIFIED },
          }),
        ),
      );
      expect(unset.code).toBe(grpcStatus.INVALID_ARGUMENT);
    });
  });
});

/** A JSON definition as the message an RPC carries. */
function definitionOf(def: Record<string, unknown>): AgentDefinition {
  return fromJson(AgentDefinitionSchema, def as never);
}
