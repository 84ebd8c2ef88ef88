/**
 * A request with two Authorization headers is a 400 REPEATED_HEADER on every surface that takes a token, over
 * HTTP/1.1 (node:http, which can send a header twice) and HTTP/2 (curl: Node's own HTTP/2 client refuses to).
 * Node keeps only the first `authorization` of a request, so before this the first token was used. Under Node
 * and Deno alike.
 */
import { execFile } from "node:child_process";
import { request } from "node:http";
import { promisify } from "node:util";
import { fromBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { testDatabases } from "../support/databases.js";
import { useServerUnder } from "../support/runtimes.js";
import { RUNTIMES } from "../support/server-process.js";

const sqlite = testDatabases().find((db) => db.name === "sqlite")!;
const LIST = `/${AgentDefinitionService.typeName}/ListAgentDefinitions`;
const REST_LIST = "/asor/v1/agentDefinition";

const ISSUE = {
  code: "REPEATED_HEADER",
  field: "Authorization",
  path: "Authorization",
  error: "The request has the header Authorization more than once; send it once.",
};

/** An HTTP/1.1 request sending each of `authorizations` as an Authorization header line of its own. */
function h1(
  url: string,
  authorizations: readonly string[],
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? "GET", headers: init.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on("error", reject);
    req.setHeader("authorization", [...authorizations]);
    req.end(init.body);
  });
}

/** curl over HTTP/2 (prior knowledge) with `headers` as given, repeated names included: status, headers, trailers. */
async function h2(
  url: string,
  headers: readonly string[],
  body?: Buffer,
  method = "GET",
): Promise<{ head: string; body: string }> {
  const args = ["-s", "--http2-prior-knowledge", "-D", "-", "-o", "-", "-X", method];
  for (const h of headers) args.push("-H", h);
  if (body !== undefined) args.push("--data-binary", `@-`);
  const child = promisify(execFile)("curl", [...args, url], { encoding: "buffer" });
  if (body !== undefined) child.child.stdin?.end(body);
  const { stdout } = await child;
  const text = (stdout as Buffer).toString("latin1");
  const end = text.indexOf("\r\n\r\n");
  return { head: text.slice(0, end), body: text.slice(end + 4) };
}

for (const runtime of RUNTIMES)
  describe(`two Authorization headers under ${runtime}`, () => {
    const server = useServerUnder(runtime, sqlite);
    const garbage = "Bearer not-a-token";

    it("HTTP/1.1 REST: 400 REPEATED_HEADER, whether the second token is another or the same", async () => {
      for (const second of [garbage, server().authorization]) {
        const res = await h1(`${server().baseUrl}${REST_LIST}`, [server().authorization, second]);
        expect(res.status).toBe(400);
        expect(JSON.parse(res.body)).toEqual({ error: ISSUE.error, errors: [ISSUE] });
      }
      // One header is served as before.
      expect((await h1(`${server().baseUrl}${REST_LIST}`, [server().authorization])).status).toBe(200);
    });

    it("HTTP/1.1 Connect (lean POST and router GET): invalid_argument with the issue as its detail", async () => {
      const post = await h1(`${server().baseUrl}${LIST}`, [server().authorization, garbage], {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      const get = await h1(`${server().baseUrl}${LIST}?connect=v1&encoding=json&message=${encodeURIComponent("{}")}`, [
        server().authorization,
        garbage,
      ]);
      for (const res of [post, get]) {
        expect(res.status).toBe(400);
        const body = JSON.parse(res.body);
        expect(body.code).toBe("invalid_argument");
        const detail = fromBinary(ValidationErrorSchema, Buffer.from(body.details[0].value, "base64"));
        expect(detail.errors).toEqual([expect.objectContaining(ISSUE)]);
      }
    });

    it("HTTP/2 REST: 400 REPEATED_HEADER", async () => {
      const res = await h2(`${server().baseUrl}${REST_LIST}`, [
        `authorization: ${server().authorization}`,
        `authorization: ${garbage}`,
      ]);
      expect(res.head).toMatch(/^HTTP\/2 400 ?\r\n/);
      expect(JSON.parse(res.body)).toEqual({ error: ISSUE.error, errors: [ISSUE] });
    });

    it("HTTP/2 gRPC: INVALID_ARGUMENT, on the lean path and through Connect's router", async () => {
      // The call is refused on its headers, before any body: it is sent without one (a POST whose headers end
      // the stream). With a body, curl 7.88 now and then (8 of 300 calls, since before a19ec6c) ends with exit
      // 92, a stream error, after it has received the whole answer: a race between its DATA and the answer's
      // end, noted in docs/decisions/issue-50.md ("the small ones") to be fixed; not what this test is about.
      for (const contentType of ["application/grpc", "application/grpc+json"]) {
        const res = await h2(
          `${server().baseUrl}${LIST}`,
          [
            `content-type: ${contentType}`,
            "te: trailers",
            `authorization: ${server().authorization}`,
            `authorization: ${garbage}`,
          ],
          undefined,
          "POST",
        );
        expect(res.head, contentType).toMatch(/^HTTP\/2 200 ?\r\n/);
        // curl writes the trailers after the body, as header lines.
        expect(res.body, contentType).toMatch(/grpc-status: 3\r\n/);
        // Percent-encoded as gRPC asks: Connect's router encodes spaces too, the lean path does not.
        const message = decodeURIComponent(/grpc-message: (.*)\r\n/.exec(res.body)?.[1] ?? "");
        expect(message, contentType).toBe(ISSUE.error);
      }
    });
  });
