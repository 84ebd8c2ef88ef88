/**
 * The MCP door (issue 45, item 4): the registry's read tools over MCP's Streamable HTTP at `/mcp`, and the
 * OAuth protected resource metadata (RFC 9728) that tells an MCP client where to get a token. The protocol is the
 * official SDK's (`WebStandardStreamableHTTPServerTransport`, stateless, JSON answers): this door only admits the
 * caller, hands the SDK the request's bytes, and answers what the SDK answers. Each tool call is admitted to its
 * own operation as REST's call would be (the token, its tenant, its security domains), and runs it (tools.ts,
 * tool-calls.ts).
 */
import * as streamableHttp from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { AgentDefinitionService } from "../../../gen/asor/v1/agent_definition_service_pb.js";
import { type HttpAnswer, jsonAnswer } from "../../http/http-answer.js";
import type { Logger } from "../../logger.js";
import type { Operations } from "../../operations/operation.js";
import { type Admit, type Door, type EdgeRequest, publicBaseOf } from "../pipeline/door.js";
import { createToolServer } from "./tool-calls.js";
import { registryTools } from "./tools.js";

/** Where MCP is served. */
export const MCP_PATH = "/mcp";
/** RFC 9728's metadata of the `/mcp` resource: the path-specific location first, then the host-wide one. */
const METADATA_PATHS = ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"];

export interface McpDoorOptions {
  readonly operations: Operations;
  readonly admit: Admit;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
  /** The registry's version (package.json's), MCP's `serverInfo.version`. */
  readonly version: string;
  /** The issuer of the tokens the registry accepts: the metadata's authorization server. */
  readonly issuer: string;
  /** The registry's public origin (PUBLIC_URL), else the request's own (`http://` and its authority). */
  readonly publicUrl: string | undefined;
}

type Match = "mcp" | "metadata";

export function mcpDoor(options: McpDoorOptions): Door<Match> {
  const tools = registryTools();
  // The operation a request's token is first checked against: every tool reads what a list does.
  const listing = options.operations.get(AgentDefinitionService.method.listAgentDefinitions);
  if (listing === undefined) throw new Error("The MCP tools' operations are missing.");
  return {
    name: "mcp",
    matches: (_req, { pathname }) =>
      pathname === MCP_PATH ? "mcp" : METADATA_PATHS.includes(pathname) ? "metadata" : undefined,
    async serve(req, match, record) {
      record.protocol = "http";
      record.endpoint = match === "mcp" ? MCP_PATH : METADATA_PATHS[0];
      if (match === "metadata") return { http: metadataAnswer(req, options) };
      if (req.method !== "POST") return { http: notPost(req.method) };
      // MCP's transports: a request from a page of another origin is refused (DNS rebinding).
      if (!sameOrigin(req, options))
        return { http: jsonRpcError(403, -32000, "The request's Origin is not this registry's.") };
      // The token first, before the body: a caller without a valid one is told where to get one.
      const admission = await options.admit(req, listing, record);
      if (admission.error?.code === "UNAUTHENTICATED")
        return { http: challenge(admission.error.message, req, options) };
      if (admission.error !== undefined && admission.error.code !== "PERMISSION_DENIED")
        return { http: jsonRpcError(admission.error.row.http, -32000, admission.error.message) };
      const body = await req.bodyBytes(options.maxBodyBytes);
      if (body === undefined)
        return { http: jsonRpcError(413, -32000, `The request is over ${options.maxBodyBytes} bytes.`) };
      const { operations, admit, logger, version } = options;
      const server = createToolServer(tools, { req, record, operations, admit, logger, version });
      const transport = new streamableHttp.WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
      try {
        await server.connect(transport);
        const response = await transport.handleRequest(webRequest(req, body));
        return { http: await answerOf(response) };
      } finally {
        await server.close();
      }
    },
  };
}

/** The request as the SDK reads it: its method, the headers MCP reads, and its bytes. */
function webRequest(req: EdgeRequest, body: Uint8Array): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers())) if (name !== "authorization") headers.set(name, value);
  return new Request(`http://registry${MCP_PATH}`, { method: "POST", headers, body: body as Uint8Array<ArrayBuffer> });
}

async function answerOf(response: Response): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  const bytes = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, headers, body: bytes.byteLength === 0 ? null : bytes };
}

/** The base of the registry's public URLs: PUBLIC_URL, else the origin the request was sent to. */
function publicBase(req: EdgeRequest, options: McpDoorOptions): string {
  return publicBaseOf(req, options.publicUrl);
}

/** Whether the request has no `Origin`, or the registry's own: PUBLIC_URL's host, else the authority it was sent to. */
function sameOrigin(req: EdgeRequest, options: McpDoorOptions): boolean {
  const origin = req.header("origin");
  if (origin === undefined) return true;
  try {
    const host = new URL(origin).host;
    return host === (options.publicUrl === undefined ? req.authority() : new URL(options.publicUrl).host);
  } catch {
    return false;
  }
}

/** RFC 9728 §3.2: the protected resource's metadata. */
function metadataAnswer(req: EdgeRequest, options: McpDoorOptions): HttpAnswer {
  if (req.method !== "GET" && req.method !== "HEAD")
    return jsonAnswer(405, { error: "method_not_allowed" }, { allow: "GET, HEAD" });
  const base = publicBase(req, options);
  return jsonAnswer(
    200,
    {
      resource: `${base}${MCP_PATH}`,
      authorization_servers: [options.issuer],
      bearer_methods_supported: ["header"],
      resource_name: "Agent Definition Registry",
      resource_documentation: `${base}/openapi.json`,
    },
    { "cache-control": "public, max-age=3600" },
  );
}

/** 401 with the Bearer challenge MCP clients follow (RFC 9728 §5.1: `resource_metadata`). */
function challenge(message: string, req: EdgeRequest, options: McpDoorOptions): HttpAnswer {
  const metadata = `${publicBase(req, options)}${METADATA_PATHS[0]}`;
  const description = message.replaceAll('"', "'");
  return jsonAnswer(
    401,
    { error: "invalid_token", error_description: message },
    {
      "www-authenticate":
        `Bearer error="invalid_token", error_description="${description}", ` + `resource_metadata="${metadata}"`,
    },
  );
}

/** A JSON-RPC error answer of the transport (no request id is known yet), as the SDK makes its own. */
function jsonRpcError(status: number, code: number, message: string): HttpAnswer {
  return jsonAnswer(status, { jsonrpc: "2.0", error: { code, message }, id: null });
}

/** Stateless: no stream of the server's own (GET) and no session to end (DELETE). */
function notPost(method: string): HttpAnswer {
  const answer = jsonRpcError(405, -32000, `Method not allowed: ${method}; MCP here takes POST.`);
  return { ...answer, headers: { ...answer.headers, allow: "POST" } };
}
