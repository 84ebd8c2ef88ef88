/**
 * Every kind of result answers the same bytes through the pipeline (src/surfaces/pipeline/) as through Connect's
 * router, which encodes it from the same operation by Connect's own codecs: a page of definitions
 * (ListAgentDefinitions, ListAgentDefinitionVersions) and an agent card (GetAgentCard), in binary gRPC against
 * gRPC-Web and in Connect unary POSTs (JSON and protobuf) against Connect GETs, headers included (ETag,
 * X-Registry-Revision, Cache-Control). lean-paths.test.ts pins a single definition and the errors.
 */
import { Buffer } from "node:buffer";
import { connect } from "node:http2";
import { create, fromJson, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentCardRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { exampleDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

const SERVICE = "/asor.v1.AgentDefinitionService";

/** The headers an RPC's answer carries for its result, as REST sends them. */
const RESULT_HEADERS = ["etag", "x-registry-revision", "cache-control"];

interface WireAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

/** One HTTP/2 request as it is (a POST of `body`, or a GET); resolves with what the server sent. */
function request(baseUrl: string, path: string, headers: Record<string, string>, body?: Uint8Array) {
  return new Promise<WireAnswer>((resolve, reject) => {
    const session = connect(baseUrl);
    session.on("error", reject);
    const method = body === undefined ? "GET" : "POST";
    const stream = session.request({ ":method": method, ":path": path, ...headers });
    let status = 0;
    const answer: Record<string, string> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      for (const [name, value] of Object.entries(h)) if (!name.startsWith(":")) answer[name] = String(value);
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve({ status, headers: answer, body: Buffer.concat(chunks) });
    });
    stream.end(body);
  });
}

/** `message` in one envelope (flag 0). */
function enveloped(message: Uint8Array): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([prefix, message]);
}

/** The first envelope's message of a gRPC or gRPC-Web body. */
function firstMessage(body: Buffer): Buffer {
  return body.subarray(5, 5 + body.readUInt32BE(1));
}

/** The result headers of an answer that it has. */
function resultHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(RESULT_HEADERS.flatMap((name) => (name in headers ? [[name, headers[name]]] : [])));
}

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
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
    for (const version of ["1.0.0", "1.1.0"]) {
      const def = { ...exampleDefinition(), version };
      const created = await client.upsertAgentDefinition(
        create(UpsertAgentDefinitionRequestSchema, {
          agentCardAndTools: fromJson(AgentDefinitionSchema, def as never),
        }),
      );
      id = created.id;
    }
  });

  /** Each RPC whose result is not a single definition, with its request, binary and as JSON. */
  const calls = () => [
    {
      method: "ListAgentDefinitions",
      binary: toBinary(ListAgentDefinitionsRequestSchema, create(ListAgentDefinitionsRequestSchema, { limit: 5 })),
      json: { limit: 5 },
    },
    {
      method: "ListAgentDefinitionVersions",
      binary: toBinary(
        ListAgentDefinitionVersionsRequestSchema,
        create(ListAgentDefinitionVersionsRequestSchema, { id }),
      ),
      json: { id },
    },
    {
      method: "GetAgentCard",
      binary: toBinary(GetAgentCardRequestSchema, create(GetAgentCardRequestSchema, { id })),
      json: { id },
    },
  ];

  describe("a page and an agent card", () => {
    it("answer binary gRPC with the message bytes and headers gRPC-Web answers through the router", async () => {
      for (const { method, binary } of calls()) {
        const headers = { authorization: server().authorization, te: "trailers" };
        const [grpc, web] = await Promise.all([
          request(
            server().baseUrl,
            `${SERVICE}/${method}`,
            { ...headers, "content-type": "application/grpc" },
            enveloped(binary),
          ),
          request(
            server().baseUrl,
            `${SERVICE}/${method}`,
            { ...headers, "content-type": "application/grpc-web+proto" },
            enveloped(binary),
          ),
        ]);
        expect(grpc.status, method).toBe(200);
        expect(firstMessage(grpc.body).equals(firstMessage(web.body)), method).toBe(true);
        expect(resultHeaders(grpc.headers), method).toEqual(resultHeaders(web.headers));
      }
    });

    it("answer Connect POSTs, JSON and protobuf, with the bytes and headers a Connect GET answers", async () => {
      for (const { method, binary, json } of calls()) {
        for (const [encoding, body, contentType] of [
          ["json", Buffer.from(JSON.stringify(json)), "application/json"],
          ["proto", binary, "application/proto"],
        ] as const) {
          const query = new URLSearchParams({
            encoding,
            message: Buffer.from(body).toString("base64url"),
            base64: "1",
            connect: "v1",
          });
          const headers = { authorization: server().authorization };
          const [posted, got] = await Promise.all([
            request(server().baseUrl, `${SERVICE}/${method}`, { ...headers, "content-type": contentType }, body),
            request(server().baseUrl, `${SERVICE}/${method}?${query}`, headers),
          ]);
          expect(posted.status, `${method} ${encoding}`).toBe(200);
          expect(got.status, `${method} ${encoding}`).toBe(200);
          expect(posted.headers["content-type"], `${method} ${encoding}`).toBe(contentType);
          expect(posted.body.equals(got.body), `${method} ${encoding}`).toBe(true);
          expect(resultHeaders(posted.headers), `${method} ${encoding}`).toEqual(resultHeaders(got.headers));
        }
      }
    });
  });
});
