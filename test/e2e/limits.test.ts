import { create, fromBinary, fromJson, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { MAX_JSON_DEPTH } from "../../src/surfaces/encoding/strict-json.js";
import { withAuthorization } from "../support/auth.js";
import { spawnAuthorizedServer } from "../support/authorized-process.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { minimalDefinition } from "../support/definitions.js";
import { fullDefinition } from "../support/full-definition.js";
import { getAt, setAt } from "../support/json-path.js";
import { forEachRuntimeAndDatabase, type ReachableServer, useServerUnder } from "../support/runtimes.js";

const PATH = "/api/asor/v1/default/agentDefinition";

/** A 4-byte UTF-8 character: limits count characters, and the database must hold 4 bytes for each. */
const WIDE = "😀";

/** Every string member with a limit, its limit in characters, and a value of a given length it accepts. */
const STRING_LIMITS: [path: string, max: number, fill: (n: number) => string][] = [
  ["name", 255, (n) => WIDE.repeat(n)],
  ["description", 10000, (n) => WIDE.repeat(n)],
  ["url", 2048, (n) => `https://agents.example.com/${"a".repeat(n - 27)}`],
  ["version", 128, (n) => WIDE.repeat(n)],
  ["provider.id", 255, (n) => `Provider=${WIDE.repeat(n - 9)}`],
  ["platform.id", 255, (n) => `Platform=${WIDE.repeat(n - 9)}`],
  ["overview", 10000, (n) => WIDE.repeat(n)],
  ["iconUrl", 2048, (n) => `https://agents.example.com/${"i".repeat(n - 27)}`],
  ["documentationUrl", 2048, (n) => `https://agents.example.com/${"d".repeat(n - 27)}`],
  ["externalAgentID", 255, (n) => WIDE.repeat(n)],
  ["externalTenantID", 255, (n) => WIDE.repeat(n)],
  ["defaultInputModes[0].type", 80, (n) => WIDE.repeat(n)],
  ["defaultOutputModes[0].type", 80, (n) => WIDE.repeat(n)],
  ["skills[0].name", 255, (n) => WIDE.repeat(n)],
  ["skills[0].description", 10000, (n) => WIDE.repeat(n)],
  ["skills[0].tags[0].tag", 255, (n) => WIDE.repeat(n)],
  ["skills[0].inputModes[0].type", 80, (n) => WIDE.repeat(n)],
  ["skills[0].outputModes[0].type", 80, (n) => WIDE.repeat(n)],
  ["hostConfig[0].hostResources[0].tool_name", 1000, (n) => WIDE.repeat(n)],
  ["hostConfig[0].hostResources[0].description", 10000, (n) => WIDE.repeat(n)],
  ["hostConfig[0].hostResources[0].agent_resource.id", 255, (n) => WIDE.repeat(n)],
  ["hostConfig[0].hostResources[0].agent_resource.descriptor", 1000, (n) => WIDE.repeat(n)],
  ["hostConfig[0].hostResources[0].tools[0].id", 255, (n) => WIDE.repeat(n)],
];

/** Every array with a limit, its most items, and the i-th item of a valid array. */
const COUNT_LIMITS: [path: string, max: number, item: (i: number) => unknown][] = [
  ["skills", 100, (i) => ({ id: i === 0 ? "s1" : `s${i + 1}`, name: `Skill ${i}`, description: "d" })],
  ["defaultInputModes", 50, (i) => ({ type: `text/x-${i}` })],
  ["defaultOutputModes", 50, (i) => ({ type: `text/x-${i}` })],
  ["skills[0].tags", 50, (i) => ({ tag: `tag-${i}` })],
  ["skills[0].inputModes", 50, (i) => ({ type: `text/x-${i}` })],
  ["skills[0].outputModes", 50, (i) => ({ type: `text/x-${i}` })],
  ["hostConfig[0].hostResources", 100, (i) => ({ tool_name: `tool ${i}`, description: "d" })],
  ["hostConfig[0].hostResources[0].tools", 100, (i) => ({ id: `item-${i}` })],
];

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const post = (body: unknown, s: ReachableServer = server()) =>
    fetch(`${s.baseUrl}${PATH}`, {
      method: "POST",
      headers: { authorization: s.authorization, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const read = async (id: string) =>
    (await fetch(`${server().baseUrl}${PATH}/${id}`, { headers: { authorization: server().authorization } })).json();

  /** Expects a 400 whose errors include `code` at `path`. */
  const expectRefused = async (res: Response, code: string, path?: string): Promise<any> => {
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(400);
    expect(body.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ code, ...(path === undefined ? {} : { path }) })]),
    );
    return body;
  };

  describe("string lengths", () => {
    it.each(STRING_LIMITS)("%s: %i characters are stored verbatim, one more is TOO_LONG", async (path, max, fill) => {
      const atMax = fullDefinition(`len ${path}`);
      setAt(atMax, path, fill(max));
      const created = await post(atMax);
      const body = await created.json();
      expect(created.status, JSON.stringify(body).slice(0, 300)).toBe(201);
      expect(getAt(await read(body.id), path)).toBe(fill(max));

      const over = fullDefinition(`len+1 ${path}`);
      setAt(over, path, fill(max + 1));
      await expectRefused(await post(over), "TOO_LONG", path);
    });

    it("a skill id of 255 characters is stored and can be named by hostConfig; 256 is TOO_LONG", async () => {
      const atMax = fullDefinition("skill id");
      atMax.skills[0].id = atMax.hostConfig[0].skillId = WIDE.repeat(255);
      const created = await post(atMax);
      expect(created.status).toBe(201);
      expect((await read((await created.json()).id)).hostConfig[0].skillId).toBe(WIDE.repeat(255));
      const over = fullDefinition("skill id+1");
      over.skills[0].id = over.hostConfig[0].skillId = WIDE.repeat(256);
      const body = await expectRefused(await post(over), "TOO_LONG", "skills[0].id");
      expect(body.errors).toEqual(
        expect.arrayContaining([expect.objectContaining({ code: "TOO_LONG", path: "hostConfig[0].skillId" })]),
      );
    });

    it(
      "the whole upsert key and externalAgentID at their limits at once fit the database's unique " + "indexes",
      async () => {
        const def = fullDefinition("key");
        Object.assign(def, {
          name: WIDE.repeat(255),
          version: WIDE.repeat(128),
          externalAgentID: `${WIDE.repeat(254)}k`,
        });
        def.provider.id = `Provider=${WIDE.repeat(246)}`;
        const first = await post(def);
        expect(first.status).toBe(201);
        // The same key again is an update of the same instance: the index compared all of it.
        const again = await post({ ...def, description: "updated" });
        expect(again.status).toBe(201);
        expect((await again.json()).id).toBe((await first.json()).id);
      },
    );

    it(
      "a definition id of 255 characters gets past the length check (it names no agent); 256 is " + "TOO_LONG",
      async () => {
        await expectRefused(
          await post(minimalDefinition({ name: "Id Limit", id: "x".repeat(255) })),
          "UNKNOWN_AGENT",
          "id",
        );
        await expectRefused(await post(minimalDefinition({ name: "Id Limit", id: "x".repeat(256) })), "TOO_LONG", "id");
        const get = (id: string) =>
          fetch(`${server().baseUrl}${PATH}/${id}`, { headers: { authorization: server().authorization } });
        expect((await get("x".repeat(255))).status).toBe(404);
        await expectRefused(await get("x".repeat(256)), "TOO_LONG", "id");
      },
    );
  });

  describe("counts", () => {
    it.each(COUNT_LIMITS)("%s: %i items are stored, one more is TOO_MANY", async (path, max, item) => {
      const atMax = fullDefinition(`count ${path}`);
      setAt(
        atMax,
        path,
        Array.from({ length: max }, (_, i) => item(i)),
      );
      const created = await post(atMax);
      const body = await created.json();
      expect(created.status, JSON.stringify(body).slice(0, 300)).toBe(201);
      expect(getAt(await read(body.id), path)).toHaveLength(max);

      const over = fullDefinition(`count+1 ${path}`);
      setAt(
        over,
        path,
        Array.from({ length: max + 1 }, (_, i) => item(i)),
      );
      await expectRefused(await post(over), "TOO_MANY", path);
    });

    it("hostConfig: 100 items (one per skill) are stored, 101 are TOO_MANY", async () => {
      const withItems = (tag: string, n: number) => {
        const def = fullDefinition(tag);
        def.skills = Array.from({ length: 100 }, (_, i) => ({ id: `s${i}`, name: `Skill ${i}`, description: "d" }));
        def.hostConfig = Array.from({ length: n }, (_, i) => ({
          skillId: `s${i % 100}`,
          executionMode: { id: "Mode=Ambient" },
        }));
        return def;
      };
      const created = await post(withItems("hostConfig", 100));
      expect(created.status).toBe(201);
      expect((await read((await created.json()).id)).hostConfig).toHaveLength(100);
      await expectRefused(await post(withItems("hostConfig+1", 101)), "TOO_MANY", "hostConfig");
    });
  });

  describe("JSON structure", () => {
    /**
     * A valid definition with an unknown member `x` holding `depth - 1` nested arrays, so the body nests
     * `depth` deep.
     */
    const nested = (depth: number) =>
      JSON.stringify(minimalDefinition({ name: "Deep" })).replace(
        /}$/,
        `,"x":${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}}`,
      );

    it(
      `nesting ${MAX_JSON_DEPTH} deep is parsed (then refused for its unknown member); one deeper is ` + `TOO_DEEP`,
      async () => {
        const parsed = await expectRefused(await post(nested(MAX_JSON_DEPTH)), "UNKNOWN_FIELD", "x");
        expect(parsed.errors.map((e: any) => e.code)).not.toContain("TOO_DEEP");
        const body = await expectRefused(await post(nested(MAX_JSON_DEPTH + 1)), "TOO_DEEP");
        expect(body.errors[0].path).toBe(`x${"[0]".repeat(MAX_JSON_DEPTH - 1)}`);
      },
    );

    it("a body nested a million deep is refused as TOO_DEEP at once, and the service carries on", async () => {
      const started = Date.now();
      await expectRefused(await post(`{"x":${"[".repeat(1_000_000)}`), "TOO_DEEP");
      expect(Date.now() - started).toBeLessThan(5_000);
      expect((await post(minimalDefinition({ name: "After Deep" }))).status).toBe(201);
    });

    it("a member given twice is DUPLICATE_KEY naming the member and its path, however it is spelled", async () => {
      const text = JSON.stringify(minimalDefinition({ name: "Twice" }));
      await expectRefused(await post(text.replace(/}$/, ',"name":"Once more"}')), "DUPLICATE_KEY", "name");
      await expectRefused(await post(text.replace(/}$/, ',"n\\u0061me":"Escaped"}')), "DUPLICATE_KEY", "name");
      const nestedTwice = text.replace('"id":"s1"', '"id":"s1","id":"s2"');
      const body = await expectRefused(await post(nestedTwice), "DUPLICATE_KEY", "skills[0].id");
      expect(body.errors[0].field).toBe("id");
    });

    it("the same member in two different objects is no duplicate", async () => {
      const res = await post(
        minimalDefinition({
          name: "Not Twice",
          skills: [
            { id: "a", name: "n", description: "d" },
            { id: "b", name: "n", description: "d" },
          ],
        }),
      );
      expect(res.status).toBe(201);
    });

    it(
      "Connect JSON refuses duplicate members and excessive nesting with the same codes, paths relative to the " +
        "definition",
      async () => {
        const rpc = (body: string) => postConnectJson(server().baseUrl, server().authorization, UPSERT_RPC, body);
        const def = JSON.stringify(minimalDefinition({ name: "Connect Twice" }));
        const twice = await rpc(`{"agentCardAndTools":${def.replace(/}$/, ',"name":"again"}')}}`);
        expect(twice.status).toBe(400);
        expect(twice.body.code).toBe("invalid_argument");
        expect(twice.validation?.errors).toEqual([
          expect.objectContaining({ code: "DUPLICATE_KEY", path: "name", field: "name" }),
        ]);

        const deep = (depth: number) =>
          `{"agentCardAndTools":${def.replace(/}$/, `,"x":${"[".repeat(depth - 2)}${"]".repeat(depth - 2)}}`)}}`;
        const atLimit = await rpc(deep(MAX_JSON_DEPTH));
        expect(atLimit.validation?.errors).toEqual([expect.objectContaining({ code: "UNKNOWN_FIELD", path: "x" })]);
        const over = await rpc(deep(MAX_JSON_DEPTH + 1));
        expect(over.status).toBe(400);
        expect(over.validation?.errors).toEqual([expect.objectContaining({ code: "TOO_DEEP" })]);
        expect((await rpc(`{"agentCardAndTools":${def}}`)).status).toBe(200);
      },
    );

    it("a Connect GET whose JSON message names a member twice is DUPLICATE_KEY too", async () => {
      const message = encodeURIComponent('{"id":"0123456789abcdef0123456789abcdef","id":"Agent_ID=AGENT-1"}');
      const res = await fetch(
        `${server().baseUrl}/asor.v1.AgentDefinitionService/GetAgentDefinition` +
          `?connect=v1&encoding=json&message=${message}`,
        {
          headers: { authorization: server().authorization },
        },
      );
      const body = await res.json();
      expect(res.status).toBe(400);
      expect(body.details?.[0]?.type).toBe("asor.v1.ValidationError");
      const detail = fromBinary(ValidationErrorSchema, Buffer.from(body.details[0].value, "base64"));
      expect(detail.errors.map((e) => [e.code, e.path])).toEqual([["DUPLICATE_KEY", "id"]]);
    });
  });

  describe("body size", () => {
    const LIMIT = 2048;
    const small = useServerUnder(runtime, db, { MAX_BODY_BYTES: String(LIMIT) });
    /** JSON text of exactly `bytes` bytes: the document, then spaces. */
    const padded = (doc: unknown, bytes: number) => {
      const text = JSON.stringify(doc);
      return text + " ".repeat(bytes - Buffer.byteLength(text));
    };

    it(`REST: a body of ${LIMIT} bytes is accepted, ${LIMIT + 1} bytes are 413 PAYLOAD_TOO_LARGE`, async () => {
      expect((await post(padded(minimalDefinition({ name: "Size REST" }), LIMIT), small())).status).toBe(201);
      const res = await post(padded(minimalDefinition({ name: "Size REST" }), LIMIT + 1), small());
      expect(res.status).toBe(413);
      expect((await res.json()).errors).toEqual([expect.objectContaining({ code: "PAYLOAD_TOO_LARGE" })]);
    });

    it("REST: a chunked body without Content-Length is cut off at the limit too", async () => {
      const chunk = new TextEncoder().encode(" ".repeat(1000));
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent === 0)
            controller.enqueue(new TextEncoder().encode(JSON.stringify(minimalDefinition({ name: "Chunked" }))));
          else controller.enqueue(chunk);
          if (++sent > 100) controller.close();
        },
      });
      const res = await fetch(`${small().baseUrl}${PATH}`, {
        method: "POST",
        headers: { authorization: small().authorization, "content-type": "application/json" },
        body,
        duplex: "half",
      } as RequestInit);
      expect(res.status).toBe(413);
    });

    it(
      `Connect JSON: ${LIMIT} bytes are accepted, ${LIMIT + 1} are RESOURCE_EXHAUSTED with ` + `PAYLOAD_TOO_LARGE`,
      async () => {
        const rpc = (body: string) => postConnectJson(small().baseUrl, small().authorization, UPSERT_RPC, body);
        expect(
          (await rpc(padded({ agentCardAndTools: minimalDefinition({ name: "Size Connect" }) }, LIMIT))).status,
        ).toBe(200);
        const over = await rpc(padded({ agentCardAndTools: minimalDefinition({ name: "Size Connect" }) }, LIMIT + 1));
        expect(over.body.code).toBe("resource_exhausted");
        expect(over.validation?.errors).toEqual([expect.objectContaining({ code: "PAYLOAD_TOO_LARGE" })]);
      },
    );

    /** An upsert request whose binary encoding is exactly `bytes` long (the description takes the slack). */
    const binaryOfSize = (bytes: number) => {
      for (let length = bytes; length > 0; length--) {
        const request = create(UpsertAgentDefinitionRequestSchema, {
          agentCardAndTools: fromJson(
            AgentDefinitionSchema,
            minimalDefinition({ name: "Size Binary", description: "d".repeat(length) }),
          ),
        });
        if (toBinary(UpsertAgentDefinitionRequestSchema, request).byteLength === bytes) return request;
      }
      throw new Error(`no request of ${bytes} bytes`);
    };

    it.each([
      [
        "gRPC",
        () =>
          createGrpcTransport({ baseUrl: small().baseUrl, interceptors: [withAuthorization(small().authorization)] }),
      ],
      [
        "Connect binary",
        () =>
          createConnectTransport({
            baseUrl: small().baseUrl,
            httpVersion: "1.1",
            useBinaryFormat: true,
            interceptors: [withAuthorization(small().authorization)],
          }),
      ],
    ])(
      `%s: a message of ${LIMIT} bytes is accepted, ${LIMIT + 1} bytes are RESOURCE_EXHAUSTED`,
      async (_name, transport) => {
        const client = createClient(AgentDefinitionService, transport());
        expect((await client.upsertAgentDefinition(binaryOfSize(LIMIT))).id).toMatch(/^[0-9a-f]{32}$/);
        const err = await client
          .upsertAgentDefinition(binaryOfSize(LIMIT + 1))
          .catch((e: unknown) => ConnectError.from(e));
        expect(err).toBeInstanceOf(ConnectError);
        expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
      },
    );

    it(
      "a chunked body over the limit does not stop a service process (it did: Readable.toWeb threw after " + "cancel)",
      async () => {
        const database = await db.create();
        const child = await spawnAuthorizedServer(database, { MAX_BODY_BYTES: String(LIMIT) }, runtime);
        try {
          for (let round = 0; round < 3; round++) {
            const chunk = new TextEncoder().encode(" ".repeat(1000));
            let sent = 0;
            const body = new ReadableStream<Uint8Array>({
              pull(controller) {
                controller.enqueue(chunk);
                if (++sent > 50) controller.close();
              },
            });
            const res = await fetch(`${child.baseUrl}${PATH}`, {
              method: "POST",
              headers: { authorization: child.authorization, "content-type": "application/json" },
              body,
              duplex: "half",
            } as RequestInit);
            expect(res.status).toBe(413);
          }
          const after = await fetch(`${child.baseUrl}${PATH}`, { headers: { authorization: child.authorization } });
          expect(after.status).toBe(200);
          expect(child.alive()).toBe(true);
        } finally {
          await child.stop();
          await database.cleanup();
        }
      },
    );

    it("a refused body leaves the service answering others at once", async () => {
      const results = await Promise.all([
        post(padded(minimalDefinition({ name: "Big" }), LIMIT * 4), small()),
        post(minimalDefinition({ name: "Small After Big" }), small()),
      ]);
      expect(results.map((r) => r.status)).toEqual([413, 201]);
    });
  });
});
