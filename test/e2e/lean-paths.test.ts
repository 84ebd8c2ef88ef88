/**
 * The lean paths (src/surfaces/grpc/, connect/): binary gRPC calls and Connect
 * unary POSTs of the registry's RPCs are served without Connect's router, and
 * answer what the router answers. Read on the wire (node:http2, headers,
 * envelope and trailers as sent), on both runtimes and both databases. gRPC
 * (grpc/unary.ts):
 * - the same message bytes and the same error trailers as gRPC-Web, which
 *   the router still serves with the same handlers;
 * - the protocol's own refusals (no message, two, a cut envelope, an unknown
 *   encoding, a malformed timeout), with Connect's codes and words;
 * - gzip in and out: a compressed request, a large answer compressed, a small
 *   one plain under the same negotiated encoding.
 * Connect (connect-unary.ts): the same JSON and protobuf bytes and the same
 * error bodies as a Connect GET of the same call (which the router serves),
 * and the protocol's refusals.
 * Auth once per call is counted in edge.test.ts, a deadline that expires in
 * cancelled-searches.test.ts (both with binary gRPC clients, so on this path).
 */
import { connect, constants } from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, fromJson, toBinary } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionsResponseSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

const SERVICE = "/asor.v1.AgentDefinitionService";

/** What came back on the wire: headers, the body's bytes, trailers. */
interface WireAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  readonly trailers: Record<string, string>;
}

/** One HTTP/2 POST of `body` as it is; resolves with what the server sent. */
function post(baseUrl: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const session = connect(baseUrl);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, ...headers });
    const answer = { status: 0, headers: {} as Record<string, string>, trailers: {} as Record<string, string> };
    const chunks: Buffer[] = [];
    const take = (into: Record<string, string>, h: Record<string, unknown>): void => {
      for (const [name, value] of Object.entries(h)) if (!name.startsWith(":")) into[name] = String(value);
    };
    stream.on("response", (h) => {
      answer.status = Number(h[":status"]);
      take(answer.headers, h);
    });
    stream.on("trailers", (h) => take(answer.trailers, h));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve({ ...answer, body: Buffer.concat(chunks) });
    });
    stream.end(body);
  });
}

/** `messages` each in an envelope (flag 0), one after the other. */
function envelopes(...messages: Uint8Array[]): Buffer {
  return Buffer.concat(
    messages.map((m) => {
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(m.byteLength, 1);
      return Buffer.concat([prefix, m]);
    }),
  );
}

/** The one envelope of an answer body: its flags and its message. */
function unenvelope(body: Buffer): { flags: number; message: Buffer } {
  expect(body.byteLength).toBeGreaterThanOrEqual(5);
  const length = body.readUInt32BE(1);
  expect(body.byteLength).toBe(5 + length);
  return { flags: body[0] as number, message: body.subarray(5) };
}

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const grpc = (method: string, body: Uint8Array, headers: Record<string, string> = {}) =>
    post(
      server().baseUrl,
      `${SERVICE}/${method}`,
      {
        "content-type": "application/grpc",
        te: "trailers",
        authorization: server().authorization,
        ...headers,
      },
      body,
    );
  const get = (id: string) =>
    toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { id }));
  let id = "";

  beforeAll(async () => {
    const client = createClient(
      AgentDefinitionService,
      createGrpcWebTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(server().authorization)],
      }),
    );
    const def = { ...exampleDefinition(), version: "grpc-path" };
    const created = await client.upsertAgentDefinition(
      create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: fromJson(AgentDefinitionSchema, def as never) }),
    );
    id = created.id;
    // Enough definitions for a page over 64 KiB, the size from which answers are compressed.
    for (let i = 0; i < 40; i++)
      await client.upsertAgentDefinition(
        create(UpsertAgentDefinitionRequestSchema, {
          agentCardAndTools: fromJson(
            AgentDefinitionSchema,
            minimalDefinition({ name: `Grpc Path ${i}`, description: "x".repeat(2000) }) as never,
          ),
        }),
      );
  });

  describe("the lean gRPC path", () => {
    it("answers the message bytes and the error trailers gRPC-Web answers through Connect's router", async () => {
      const web = (body: Uint8Array) =>
        post(
          server().baseUrl,
          `${SERVICE}/GetAgentDefinition`,
          {
            "content-type": "application/grpc-web+proto",
            authorization: server().authorization,
          },
          body,
        );
      const [lean, routed] = await Promise.all([
        grpc("GetAgentDefinition", envelopes(get(id))),
        web(envelopes(get(id))),
      ]);
      expect(lean.headers["content-type"]).toBe("application/grpc+proto");
      expect(lean.headers.etag).toBe(routed.headers.etag);
      expect(lean.trailers["grpc-status"]).toBe("0");
      const message = unenvelope(lean.body).message;
      // gRPC-Web's body: the message's envelope, then the trailers' (flag 0x80).
      const webMessage = routed.body.subarray(5, 5 + routed.body.readUInt32BE(1));
      expect(message.equals(webMessage)).toBe(true);
      expect(fromBinary(AgentDefinitionSchema, message).id).toBe(id);

      const missing = "0123456789abcdef0123456789abcdef";
      const [leanError, routedError] = await Promise.all([
        grpc("GetAgentDefinition", envelopes(get(missing))),
        web(envelopes(get(missing))),
      ]);
      expect(leanError.body.byteLength).toBe(0);
      expect(leanError.trailers["grpc-status"]).toBe(String(Code.NotFound));
      const webTrailers = routedError.body.subarray(5).toString("latin1");
      expect(webTrailers).toContain(`grpc-status-details-bin: ${leanError.trailers["grpc-status-details-bin"]}`);
      // The same text, encoded as gRPC's spec asks on the lean path and as encodeURIComponent does through the
      // router (src/surfaces/grpc/status.ts): both decode to it.
      const webText = /grpc-message: (.*)\r\n/.exec(webTrailers)?.[1];
      expect(leanError.trailers["grpc-message"]).toBe(`Agent definition "${missing}" was not found.`);
      expect(decodeURIComponent(webText ?? "")).toBe(leanError.trailers["grpc-message"]);
    });

    it("survives a client that resets its calls with an error code, mid-body and mid-answer", async () => {
      const session = connect(server().baseUrl);
      session.on("error", () => undefined);
      const headers = {
        ":method": "POST",
        ":path": `${SERVICE}/GetAgentDefinition`,
        "content-type": "application/grpc",
        te: "trailers",
        authorization: server().authorization,
      };
      const resets = [];
      for (let i = 0; i < 20; i++) {
        const stream = session.request(headers);
        stream.on("error", () => undefined);
        const closed = new Promise((resolve) => stream.once("close", resolve));
        if (i % 2 === 0) {
          // Mid-body: half an envelope, then a reset.
          stream.write(envelopes(get(id)).subarray(0, 8));
          stream.close(constants.NGHTTP2_INTERNAL_ERROR);
        } else {
          // Mid-answer: the whole request, then a reset as soon as the answer starts.
          stream.once("response", () => stream.close(constants.NGHTTP2_PROTOCOL_ERROR));
          stream.end(envelopes(get(id)));
        }
        resets.push(closed);
      }
      await Promise.all(resets);
      session.close();
      // The process is alive and answers.
      const after = await grpc("GetAgentDefinition", envelopes(get(id)));
      expect(after.trailers["grpc-status"]).toBe("0");
    });

    it.each([
      ["no message", () => Buffer.alloc(0), {}, Code.Unimplemented, "missing input message"],
      [
        "two messages",
        () => envelopes(Buffer.alloc(0), Buffer.alloc(0)),
        {},
        Code.Unimplemented,
        "extra input message",
      ],
      ["a cut envelope", () => envelopes(Buffer.alloc(10)).subarray(0, 8), {}, Code.InvalidArgument, "incomplete"],
      [
        "an unknown encoding",
        () => envelopes(Buffer.alloc(0)),
        { "grpc-encoding": "zstd" },
        Code.Unimplemented,
        "zstd",
      ],
      ["a malformed timeout", () => envelopes(Buffer.alloc(0)), { "grpc-timeout": "1x" }, Code.InvalidArgument, "1x"],
    ])("refuses %s as Connect's gRPC handler does", async (_, body, headers, code, words) => {
      const answer = await grpc("ListAgentDefinitions", body(), headers as Record<string, string>);
      const err = findTrailerError(new Headers(answer.trailers));
      expect(err?.code).toBe(code);
      expect(err?.rawMessage).toContain(words);
      if ("grpc-encoding" in headers) expect(answer.trailers["grpc-accept-encoding"]).toBe("gzip,br");
    });

    it("reads a gzip message, answers a large page gzip and a small answer plain", async () => {
      const list = toBinary(
        ListAgentDefinitionsRequestSchema,
        create(ListAgentDefinitionsRequestSchema, { limit: 40 }),
      );
      const compressed = Buffer.concat([Buffer.from([1, 0, 0, 0, 0]), gzipSync(list)]);
      compressed.writeUInt32BE(compressed.byteLength - 5, 1);
      const headers = { "grpc-encoding": "gzip", "grpc-accept-encoding": "gzip" };
      const page = await grpc("ListAgentDefinitions", compressed, headers);
      expect(page.trailers["grpc-status"]).toBe("0");
      expect(page.headers["grpc-encoding"]).toBe("gzip");
      const pageEnvelope = unenvelope(page.body);
      expect(pageEnvelope.flags).toBe(1);
      const decoded = fromBinary(ListAgentDefinitionsResponseSchema, gunzipSync(pageEnvelope.message));
      expect(decoded.data).toHaveLength(40);
      expect(pageEnvelope.message.byteLength).toBeGreaterThan(0);

      const small = await grpc("GetAgentDefinition", envelopes(get(id)), headers);
      expect(small.trailers["grpc-status"]).toBe("0");
      expect(unenvelope(small.body).flags).toBe(0);
    });
  });

  describe("the lean Connect path", () => {
    const connectPost = (body: Uint8Array, headers: Record<string, string>) =>
      post(
        server().baseUrl,
        `${SERVICE}/GetAgentDefinition`,
        { authorization: server().authorization, ...headers },
        body,
      );
    /** The same call as a Connect GET, which Connect's router serves. */
    const connectGet = async (message: Uint8Array, encoding: "json" | "proto") => {
      const query = new URLSearchParams({
        encoding,
        message: Buffer.from(message).toString("base64url"),
        base64: "1",
        connect: "v1",
      });
      const res = await fetch(`${server().baseUrl}${SERVICE}/GetAgentDefinition?${query}`, {
        headers: { authorization: server().authorization },
      });
      return { status: res.status, etag: res.headers.get("etag"), body: Buffer.from(await res.arrayBuffer()) };
    };
    const json = (value: unknown) => Buffer.from(JSON.stringify(value));

    it(
      "answers the JSON and protobuf bytes " + "and the error bodies a Connect GET answers through the router",
      async () => {
        for (const [encoding, body, contentType] of [
          ["json", json({ id }), "application/json"],
          ["proto", get(id), "application/proto"],
        ] as const) {
          const [lean, routed] = await Promise.all([
            connectPost(body, { "content-type": contentType }),
            connectGet(body, encoding),
          ]);
          expect(lean.status).toBe(200);
          expect(lean.headers["content-type"]).toBe(contentType);
          expect(lean.headers.etag).toBe(routed.etag);
          expect(lean.body.equals(routed.body)).toBe(true);
        }
        const missing = json({ id: "0123456789abcdef0123456789abcdef" });
        const [lean, routed] = await Promise.all([
          connectPost(missing, { "content-type": "application/json" }),
          connectGet(missing, "json"),
        ]);
        expect(routed.status).toBe(404);
        expect(lean.status).toBe(404);
        expect(JSON.parse(lean.body.toString())).toEqual(JSON.parse(routed.body.toString()));
        expect(JSON.parse(lean.body.toString()).code).toBe("not_found");
      },
    );

    it.each([
      ["an unknown encoding", { "content-encoding": "zstd" }, "unimplemented", "zstd"],
      ["a malformed timeout", { "connect-timeout-ms": "soon" }, "invalid_argument", "soon"],
      ["a body that is not JSON", {}, "invalid_argument", "JSON"],
    ])("refuses %s as Connect's unary handler does", async (label, headers, code, words) => {
      const body = label === "a body that is not JSON" ? Buffer.from("{") : json({ id });
      const answer = await connectPost(body, { "content-type": "application/json", ...headers });
      expect(answer.status).toBe(code === "unimplemented" ? 501 : 400);
      const error = JSON.parse(answer.body.toString());
      expect(error.code).toBe(code);
      expect(error.message).toContain(words);
      if ("content-encoding" in headers) expect(answer.headers["accept-encoding"]).toBe("gzip,br");
    });
  });
});
