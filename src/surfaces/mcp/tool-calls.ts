/**
 * One MCP request's server: the SDK's low-level `Server` (its JSON-RPC, initialization and version negotiation),
 * with the registry's tools listed and called. A call is admitted to its tool's operation as REST's would be, its
 * arguments checked as a JSON body is (each wrong member named with its path), the operation run, and its
 * result answered as REST answers it: the JSON as text, and as structured content. A refusal or a failure is a
 * tool result with `isError` and the error in the spec's error shape (MCP: errors of a tool are results).
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { errorBody, invalid, issueAt, type RegistryError } from "../../domain/errors.js";
import type { Logger } from "../../logger.js";
import type { RequestRecord } from "../../observability/request-record.js";
import { type Operations, runOperation } from "../../operations/operation.js";
import { messageOfCheckedJson } from "../encoding/body-check.js";
import { jsonIssues } from "../encoding/json-members.js";
import { resultJson } from "../encoding/result-json.js";
import type { Admit, EdgeRequest } from "../pipeline/door.js";
import { callerError } from "../pipeline/failures.js";
import type { McpTool } from "./tools.js";

/** What a tool call needs of its request: the request itself (its token), its record, the operations. */
export interface ToolCallContext {
  readonly req: EdgeRequest;
  readonly record: RequestRecord;
  readonly operations: Operations;
  readonly admit: Admit;
  readonly logger: Logger;
  /** The registry's version, for the server's `serverInfo`. */
  readonly version: string;
}

/**
 * The JSON Schema validator every request's server shares (the SDK's, for elicitation, which these tools do not
 * use): made per server, a new Ajv with its rule set cost every request (ajv's `addRule` in the bench's profile);
 * shared, REST's CPU a request over MCP's went from 0.49-0.53 to 0.58-0.62 (bench/mcp.ts).
 */
const validator = new AjvJsonSchemaValidator();
const decoder = new TextDecoder();

/** A server for one request: stateless, every request has its own (the SDK's stateless pattern). */
export function createToolServer(tools: readonly McpTool[], context: ToolCallContext): Server {
  const server = new Server(
    { name: "agent-definition-registry", version: context.version },
    {
      jsonSchemaValidator: validator,
      capabilities: { tools: {} },
      instructions:
        "Read-only tools of an agent definition registry: search the agents registered in your tenant, read one, " +
        "its A2A card, and its versions.",
    },
  );
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map(({ name, title, description, inputSchema, outputSchema }) => ({
      name,
      title,
      description,
      inputSchema: inputSchema as { type: "object" },
      outputSchema: outputSchema as { type: "object" },
      annotations: { readOnlyHint: true, openWorldHint: false },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = byName.get(request.params.name);
    if (tool === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    return callTool(tool, request.params.arguments ?? {}, context);
  });
  return server;
}

async function callTool(
  tool: McpTool,
  args: Record<string, unknown>,
  context: ToolCallContext,
): Promise<CallToolResult> {
  const { req, record, operations, admit, logger } = context;
  const operation = operations.get(tool.method);
  if (operation === undefined) throw new Error(`${tool.method.name} has no operation.`);
  const admission = await admit(req, operation, record);
  if (admission.error !== undefined) return errorResult(admission.error);
  try {
    const input = argumentsOf(tool, args);
    const result = await runOperation(operation, admission.call, input);
    const text = decoder.decode(resultJson(result, tool.method.output));
    return { content: [{ type: "text", text }], structuredContent: JSON.parse(text) as Record<string, unknown> };
  } catch (err) {
    return errorResult(callerError(err, logger, `${tool.method.parent.typeName}/${tool.method.name}`, { record }));
  }
}

/** The tool's arguments as its RPC's request, checked as a JSON body is; `tenant` is the token's, never an argument. */
function argumentsOf(tool: McpTool, args: Record<string, unknown>) {
  if (Object.hasOwn(args, "tenant"))
    throw invalid([
      issueAt("tenant", "UNKNOWN_FIELD", "tenant is not an argument: a tool acts on the token's tenant."),
    ]);
  const issues = jsonIssues(tool.method.input, args, "", { protoNames: false });
  if (issues.length > 0) throw invalid(issues);
  return messageOfCheckedJson(tool.method.input, args as JsonValue);
}

function errorResult(error: RegistryError): CallToolResult {
  return { isError: true, content: [{ type: "text", text: JSON.stringify(errorBody(error)) }] };
}
