/**
 * The registry's MCP tools (issue 45, item 4): each is one of the registry's read RPCs, so a tool runs the very
 * operation REST and gRPC run (the same tenant rules, security domains and validation) and answers what REST
 * answers, as structured content. Their schemas are made from the contract (the RPC's request and response
 * messages, as the OpenAPI document makes them), so a tool cannot drift from the RPC it is.
 */
import type { DescMessage, DescMethod, JsonObject } from "@bufbuild/protobuf";
import { AgentDefinitionService } from "../../../gen/asor/v1/agent_definition_service_pb.js";
import { createMessageSchemas } from "../encoding/message-schemas.js";

export interface McpTool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** The RPC the tool runs. */
  readonly method: DescMethod;
  /** JSON Schema (2020-12) of the arguments: the request message's JSON without `tenant` (the token's tenant). */
  readonly inputSchema: JsonObject;
  /** JSON Schema of the structured result: the response message's JSON, as REST answers it. */
  readonly outputSchema: JsonObject;
}

const methods = AgentDefinitionService.method;

const TOOLS: readonly Omit<McpTool, "inputSchema" | "outputSchema">[] = [
  {
    name: "search_agents",
    title: "Search agents",
    description:
      "Lists the agent definitions of the caller's tenant that match: `q` (words, relevance ordered with " +
      "`orderBy: relevance`) and exact filters (name, provider, platform, version, tag, skillId, status...), " +
      "a page at a time (`limit`, then `pageToken` from `nextPageToken`). Only ACTIVE ones unless `status` says.",
    method: methods.listAgentDefinitions,
  },
  {
    name: "get_agent",
    title: "Get an agent definition",
    description: "One agent definition by its id, or an agent's current version by `Agent_ID=<reference>`.",
    method: methods.getAgentDefinition,
  },
  {
    name: "get_agent_card",
    title: "Get an agent's A2A card",
    description:
      "The A2A v1.0 agent card of one definition (by id), or of an agent's current version (`Agent_ID=<reference>`).",
    method: methods.getAgentCard,
  },
  {
    name: "list_agent_versions",
    title: "List an agent's versions",
    description: "Every version of the agent that a definition id (or `Agent_ID=<reference>`) belongs to, paged.",
    method: methods.listAgentDefinitionVersions,
  },
];

/** The tools, their schemas made once. */
export function registryTools(): readonly McpTool[] {
  const schemas = createMessageSchemas();
  return TOOLS.map((tool) => {
    const inputSchema = standalone(schemas, tool.method.input);
    const properties = { ...(inputSchema.properties as JsonObject) };
    delete properties.tenant;
    return {
      ...tool,
      inputSchema: { ...inputSchema, properties },
      outputSchema: standalone(schemas, tool.method.output),
    };
  });
}

/** `desc`'s schema on its own: the messages it refers to under `$defs`, referred to there. */
function standalone(schemas: ReturnType<typeof createMessageSchemas>, desc: DescMessage): JsonObject {
  const ref = String(schemas.ref(desc).$ref);
  const components = JSON.parse(
    JSON.stringify(schemas.components()).replaceAll('"#/components/schemas/', '"#/$defs/'),
  ) as Record<string, JsonObject>;
  const name = ref.slice(ref.lastIndexOf("/") + 1);
  const { [name]: own, ...rest } = components;
  if (own === undefined) throw new Error(`${desc.typeName} has no schema.`);
  const used = usedDefinitions(own, components);
  return {
    ...own,
    ...(used.size === 0 ? {} : { $defs: Object.fromEntries([...used].map((n) => [n, rest[n] ?? own])) }),
  };
}

/** The names of the `$defs` that `schema` refers to, directly or through others. */
function usedDefinitions(schema: JsonObject, components: Record<string, JsonObject>): Set<string> {
  const used = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === "object" && value !== null) {
      for (const [key, member] of Object.entries(value)) {
        if (key === "$ref" && typeof member === "string" && member.startsWith("#/$defs/")) {
          const name = member.slice("#/$defs/".length);
          if (!used.has(name)) {
            used.add(name);
            visit(components[name]);
          }
        } else visit(member);
      }
    }
  };
  visit(schema);
  return used;
}
