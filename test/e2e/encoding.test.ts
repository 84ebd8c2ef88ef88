import { create, fromBinary, fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { withAuthorization } from "../support/auth.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition, withoutReadOnly } from "../support/definitions.js";
import { fullDefinition } from "../support/full-definition.js";
import { rawGrpcCall } from "../support/raw-grpc.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";

/**
 * SQL that would do damage if it were ever spliced into a statement, and characters that mean something to
 * LIKE, knex or drivers.
 */
const SQL_TEXTS = [
  "Robert'); DROP TABLE agent_definitions;--",
  "' OR '1'='1",
  '" OR ""="',
  "`tenants`; DELETE FROM tenants; #",
  "100% _wild_ \\%\\_ LIKE",
  "?? ? :name $1 @var",
  "/* comment */ -- trailing",
  "back\\slash \\' \\\" \\n",
];

/** Text that breaks naive handling of Unicode: 4-byte characters, combining marks, right-to-left scripts. */
const UNICODE_TEXTS = [
  "Emoji 😀🚀🧪 and 4-byte 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
  "Flag 🇳🇿 skin 👍🏽",
  "RTL مرحبا بالعالم שלום",
  "Combining e\u0301 a\u0308 Z\u0351\u0353\u0325",
  "CJK 漢字かなカナ 한국어",
  "Noncharacters \ufdd0 \uffff 𿿿",
];

/**
 * Unicode that names and identifiers may not hold (src/domain/identifying-text.ts), free text may: joiners,
 * bidi controls, zero-width characters, separators.
 */
const FREE_TEXT_UNICODE = [
  "Family 👩‍👩‍👧‍👦 (joined by U+200D)",
  "Override \u202eevil\u202c and isolate \u2067x\u2069",
  "Zero width \u200b\u200c\u200d and BOM \ufeff inside",
  "Separators \u2028 \u2029 and \u0085",
];

/** Strings with NUL and other C0 control characters. */
const CONTROL_TEXTS = [
  "NUL\u0000inside",
  "\u0000leading",
  "trailing\u0000",
  "Tab\tNewline\nReturn\rBell\u0007Escape\u001b",
];

forEachDatabase((db) => {
  const server = useServer(db);
  const headers = (contentType = "application/json") => ({
    authorization: server().authorization,
    "content-type": contentType,
  });
  const post = (body: string | Uint8Array, contentType?: string) =>
    fetch(`${server().baseUrl}${PATH}`, { method: "POST", headers: headers(contentType), body: body as BodyInit });
  const read = async (id: string) =>
    (
      await fetch(`${server().baseUrl}${PATH}/${encodeURIComponent(id)}`, {
        headers: { authorization: server().authorization },
      })
    ).json();

  /**
   * A full definition with `text` in every free-text member and, unless `inNames` is false (text that names
   * and identifiers may not hold), inside every id-like one.
   */
  const everywhere = (tag: string, text: string, inNames = true) => {
    const def = fullDefinition(tag);
    Object.assign(def, { description: text, overview: text });
    Object.assign(def.skills[0], { description: text });
    const resource = def.hostConfig[0].hostResources[0];
    Object.assign(resource, { description: text });
    if (!inNames) return def;
    Object.assign(def, {
      name: `${tag} ${text}`,
      version: text,
      externalAgentID: `${tag} ${text}`,
      externalTenantID: text,
    });
    def.provider.id = `Provider=${text.replace(/\s/g, "_")}`;
    def.skills[0].id = def.hostConfig[0].skillId = text;
    Object.assign(def.skills[0], { name: text });
    def.skills[0].tags[0].tag = text;
    def.skills[0].inputModes[0].type = text.slice(0, 80);
    Object.assign(resource, { tool_name: text });
    resource.agent_resource.id = resource.agent_resource.descriptor = text;
    resource.tools[0].id = text;
    return def;
  };

  /** POSTs `def` over REST and expects it back, member for member, from the POST and from a GET. */
  const roundTrip = async (def: Record<string, any>) => {
    const res = await post(JSON.stringify(def));
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(201);
    expect(withoutReadOnly(body)).toEqual(def);
    expect(withoutReadOnly(await read(body.id))).toEqual(def);
    return body;
  };

  describe("SQL metacharacters", () => {
    it.each(SQL_TEXTS)("are stored verbatim in every member, keys included: %s", async (text) => {
      await roundTrip(everywhere(`sql ${SQL_TEXTS.indexOf(text)}`, text));
    });

    it(
      "change nothing in the database: every table is still there and the same key still updates in " + "place",
      async () => {
        const def = everywhere("sql again", SQL_TEXTS[0]!);
        const first = await roundTrip(def);
        const second = await roundTrip({ ...def, description: "second" });
        expect(second.id).toBe(first.id);
        const list = await (
          await fetch(`${server().baseUrl}${PATH}?limit=100`, { headers: { authorization: server().authorization } })
        ).json();
        expect(list.total).toBeGreaterThanOrEqual(SQL_TEXTS.length + 1);
      },
    );

    it("in a path id or a tenant are a 404 or a 400, never a match", async () => {
      const get = (path: string) =>
        fetch(`${server().baseUrl}${path}`, { headers: { authorization: server().authorization } });
      expect((await get(`${PATH}/${encodeURIComponent("' OR '1'='1")}`)).status).toBe(404);
      expect((await get(`${PATH}/${encodeURIComponent("Agent_ID=' OR 1=1 --")}`)).status).toBe(404);
      const tenant = await get(`/api/asor/v1/${encodeURIComponent("default' --")}/agentDefinition`);
      expect([400, 403]).toContain(tenant.status);
    });
  });

  describe("Unicode", () => {
    it.each(UNICODE_TEXTS)("is stored and answered verbatim in every member: %s", async (text) => {
      await roundTrip(everywhere(`unicode ${UNICODE_TEXTS.indexOf(text)}`, text));
    });

    it.each(FREE_TEXT_UNICODE)(
      "is stored and answered verbatim in free text, and refused in a name: %s",
      async (text) => {
        await roundTrip(everywhere(`free unicode ${FREE_TEXT_UNICODE.indexOf(text)}`, text, false));
        const res = await post(JSON.stringify(minimalDefinition({ name: `Named ${text}` })));
        expect(res.status).toBe(400);
        expect((await res.json()).errors).toEqual([
          expect.objectContaining({ code: "INVALID_CHARACTER", field: "name", path: "name" }),
        ]);
      },
    );

    it("compares keys byte for byte: a precomposed and a combining é are two agents, not one", async () => {
      const composed = await roundTrip(minimalDefinition({ name: "Caf\u00e9" }));
      const combining = await roundTrip(minimalDefinition({ name: "Cafe\u0301" }));
      expect(combining.id).not.toBe(composed.id);
      expect(combining.reference_id).not.toBe(composed.reference_id);
    });

    it.each([
      [
        "Connect JSON",
        (s: { baseUrl: string; authorization: string }) =>
          createConnectTransport({
            baseUrl: s.baseUrl,
            httpVersion: "1.1",
            interceptors: [withAuthorization(s.authorization)],
          }),
      ],
      [
        "gRPC",
        (s: { baseUrl: string; authorization: string }) =>
          createGrpcTransport({ baseUrl: s.baseUrl, interceptors: [withAuthorization(s.authorization)] }),
      ],
    ])("comes back verbatim over %s, and the same as over REST", async (name, transport) => {
      const client = createClient(AgentDefinitionService, transport(server()));
      const texts = [
        ...UNICODE_TEXTS.map((text) => ({ text, inNames: true })),
        ...[...FREE_TEXT_UNICODE, ...CONTROL_TEXTS].map((text) => ({ text, inNames: false })),
      ];
      for (const [i, { text, inNames }] of texts.entries()) {
        const def = everywhere(`${name} ${i}`, text, inNames);
        const created = await client.upsertAgentDefinition(
          create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: fromJson(AgentDefinitionSchema, def) }),
        );
        expect(withoutReadOnly(toJson(AgentDefinitionSchema, created) as Record<string, any>)).toEqual(def);
        expect(withoutReadOnly(await read(created.id))).toEqual(def);
      }
    });
  });

  describe("NUL and control characters", () => {
    it.each(CONTROL_TEXTS.map((t) => [JSON.stringify(t), t]))(
      "are stored verbatim in every free-text member: %s",
      async (_label, text) => {
        await roundTrip(everywhere(`control ${CONTROL_TEXTS.indexOf(text)}`, text, false));
      },
    );

    it("a NUL in a key member is a 400 INVALID_CHARACTER naming it, and nothing is stored", async () => {
      const res = await post(JSON.stringify(minimalDefinition({ name: "Nul Key\u0000", version: "\u0000" })));
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([
        expect.objectContaining({ code: "INVALID_CHARACTER", field: "name", path: "name" }),
        expect.objectContaining({ code: "INVALID_CHARACTER", field: "version", path: "version" }),
      ]);
      const list = await (
        await fetch(`${server().baseUrl}${PATH}?limit=100`, { headers: { authorization: server().authorization } })
      ).json();
      expect(list.data.filter((d: any) => d.name.startsWith("Nul Key"))).toEqual([]);
    });
  });

  describe("invalid encodings are refused clearly", () => {
    const valid = new TextEncoder().encode(JSON.stringify(minimalDefinition({ name: "Bytes XXXX" })));
    /** The valid body with the bytes of "XXXX" in the name replaced. */
    const withBytes = (bytes: number[]) => {
      const at = Buffer.from(valid).indexOf("XXXX");
      const out = Buffer.concat([
        Buffer.from(valid.subarray(0, at)),
        Buffer.from(bytes),
        Buffer.from(valid.subarray(at + 4)),
      ]);
      return new Uint8Array(out);
    };
    const BAD_UTF8: [string, number[]][] = [
      ["a lone continuation byte", [0x80]],
      ["0xFF", [0xff]],
      ["an overlong '/'", [0xc0, 0xaf]],
      ["a surrogate encoded as UTF-8 (CESU-8)", [0xed, 0xa0, 0x80]],
      ["a truncated 4-byte sequence", [0xf0, 0x9f, 0x98]],
      ["a code point above U+10FFFF", [0xf4, 0x90, 0x80, 0x80]],
    ];

    it.each(BAD_UTF8)("REST: invalid UTF-8 (%s) is a 400 MALFORMED_JSON, nothing stored", async (_label, bytes) => {
      const res = await post(withBytes(bytes));
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([expect.objectContaining({ code: "MALFORMED_JSON" })]);
    });

    it.each(BAD_UTF8)(
      "Connect JSON: invalid UTF-8 (%s) is INVALID_ARGUMENT with MALFORMED_JSON",
      async (_label, bytes) => {
        const body = new Uint8Array([...new TextEncoder().encode('{"agentCardAndTools":'), ...withBytes(bytes), 0x7d]);
        const answer = await postConnectJson(server().baseUrl, server().authorization, UPSERT_RPC, body);
        expect(answer.status).toBe(400);
        expect(answer.validation?.errors).toEqual([expect.objectContaining({ code: "MALFORMED_JSON" })]);
      },
    );

    it("multipart: a part with invalid UTF-8 is a 400 MALFORMED_JSON", async () => {
      const form = new FormData();
      form.set("agentCardAndTools", new Blob([withBytes([0xff])], { type: "application/json" }), "definition.json");
      const res = await fetch(`${server().baseUrl}${PATH}`, {
        method: "POST",
        headers: { authorization: server().authorization },
        body: form,
      });
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([expect.objectContaining({ code: "MALFORMED_JSON" })]);
    });

    /** A multipart body whose one part, a field (no filename, so the runtime decodes it as text), holds `part`. */
    const fieldPart = (part: Uint8Array) =>
      new Uint8Array(
        Buffer.concat([
          Buffer.from('--b\r\ncontent-disposition: form-data; name="agentCardAndTools"\r\n\r\n'),
          Buffer.from(part),
          Buffer.from("\r\n--b--\r\n"),
        ]),
      );

    it.each(BAD_UTF8)(
      "multipart: a field part with invalid UTF-8 (%s) gets the JSON body's 400, not stored with U+FFFD",
      async (_label, bytes) => {
        const json = await post(withBytes(bytes));
        const multipart = await post(fieldPart(withBytes(bytes)), "multipart/form-data; boundary=b");
        expect(multipart.status).toBe(400);
        const answer = await multipart.json();
        expect(answer).toEqual(await json.json());
        expect(answer.errors).toEqual([
          {
            code: "MALFORMED_JSON",
            field: "agentCardAndTools",
            path: "agentCardAndTools",
            error: "The body is not valid UTF-8.",
          },
        ]);
      },
    );

    it("multipart: a field part holding U+FFFD itself, as valid UTF-8, is stored with it", async () => {
      const def = minimalDefinition({ name: "Replacement \ufffd kept" });
      const created = await post(
        fieldPart(new TextEncoder().encode(JSON.stringify(def))),
        "multipart/form-data; boundary=b",
      );
      expect(created.status).toBe(201);
      expect((await created.json()).name).toBe("Replacement \ufffd kept");
    });

    it(
      "protobuf binary (Connect and gRPC): a string with invalid UTF-8 is INVALID_ARGUMENT with " +
        "MALFORMED_PROTOBUF, not a 500, not stored with U+FFFD",
      async () => {
        const request = create(UpsertAgentDefinitionRequestSchema, {
          agentCardAndTools: fromJson(AgentDefinitionSchema, minimalDefinition({ name: "Binary XXXX" })),
        });
        const bytes = Buffer.from(toBinary(UpsertAgentDefinitionRequestSchema, request));
        bytes.set([0xff, 0xfe, 0xc0, 0xaf], bytes.indexOf("XXXX"));
        const res = await fetch(`${server().baseUrl}/${UPSERT_RPC}`, {
          method: "POST",
          headers: { ...headers("application/proto"), "connect-protocol-version": "1" },
          body: bytes,
        });
        expect(res.status).toBe(400);
        const body = await res.json();
        expect(body.code).toBe("invalid_argument");
        const detail = fromBinary(ValidationErrorSchema, Buffer.from(body.details[0].value, "base64"));
        expect(detail.errors.map((e) => e.code)).toEqual(["MALFORMED_PROTOBUF"]);

        const grpc = await rawGrpcCall(server().baseUrl, server().authorization, UPSERT_RPC, bytes);
        expect(grpc?.code).toBe(Code.InvalidArgument);
        expect(grpc?.findDetails(ValidationErrorSchema)[0]?.errors.map((e) => e.code)).toEqual(["MALFORMED_PROTOBUF"]);
        const list = await (
          await fetch(`${server().baseUrl}${PATH}?limit=100`, { headers: { authorization: server().authorization } })
        ).json();
        expect(list.data.map((d: any) => d.name).filter((n: string) => n.startsWith("Binary"))).toEqual([]);
      },
    );

    it.each([
      ["a lone high surrogate", "\\ud800"],
      ["a lone low surrogate", "\\udc00"],
      ["two high surrogates", "\\ud83d\\ud83d"],
    ])(
      "REST and Connect JSON: %s escaped in JSON is a 400 INVALID_UNICODE naming the member",
      async (_label, escaped) => {
        const text = JSON.stringify(minimalDefinition({ name: "Surrogate XXXX" })).replace("XXXX", escaped);
        const res = await post(text);
        expect(res.status).toBe(400);
        expect((await res.json()).errors).toEqual([
          expect.objectContaining({ code: "INVALID_UNICODE", path: "name", field: "name" }),
        ]);
        const answer = await postConnectJson(
          server().baseUrl,
          server().authorization,
          UPSERT_RPC,
          `{"agentCardAndTools":${text}}`,
        );
        expect(answer.status).toBe(400);
        expect(answer.validation?.errors).toEqual([expect.objectContaining({ code: "INVALID_UNICODE", path: "name" })]);
      },
    );

    it("a path segment that is not valid percent-encoded UTF-8 is a 400", async () => {
      const res = await fetch(`${server().baseUrl}${PATH}/%FF%FE`, {
        headers: { authorization: server().authorization },
      });
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([expect.objectContaining({ code: "INVALID_VALUE", path: "id" })]);
    });
  });
});
