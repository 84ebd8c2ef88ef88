/**
 * The A2A protocol v1.0 AgentCard as a JSON Schema (draft 2020-12), written
 * here from the A2A specification (`specification/a2a.proto` of
 * a2aproject/A2A, v1.0: the messages AgentCard, AgentInterface,
 * AgentProvider, AgentCapabilities, AgentExtension, AgentSkill,
 * AgentCardSignature), independently of the registry's own proto: the
 * members A2A marks REQUIRED are `required` here, every member has its JSON
 * type, and members A2A does not define are refused, so a card the registry
 * answers must be an A2A card and nothing else. Security schemes are checked
 * only as objects (the registry never sends them).
 */
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import formats from "ajv-formats";

const strings = { type: "array", items: { type: "string" } };
const mediaTypes = { type: "array", items: { type: "string", pattern: "^[^/\\s]+/[^/\\s]+$" } };
const securityRequirement = {
  type: "object",
  properties: {
    schemes: {
      type: "object",
      additionalProperties: { type: "object", properties: { list: strings }, additionalProperties: false },
    },
  },
  additionalProperties: false,
};

export const A2A_AGENT_CARD_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "urn:a2a:v1.0:AgentCard",
  type: "object",
  required: [
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
  ],
  properties: {
    name: { type: "string" },
    description: { type: "string" },
    supportedInterfaces: { type: "array", minItems: 1, items: { $ref: "#/$defs/AgentInterface" } },
    provider: { $ref: "#/$defs/AgentProvider" },
    version: { type: "string" },
    documentationUrl: { type: "string", format: "uri" },
    capabilities: { $ref: "#/$defs/AgentCapabilities" },
    securitySchemes: { type: "object", additionalProperties: { type: "object" } },
    securityRequirements: { type: "array", items: securityRequirement },
    defaultInputModes: mediaTypes,
    defaultOutputModes: mediaTypes,
    skills: { type: "array", items: { $ref: "#/$defs/AgentSkill" } },
    signatures: { type: "array", items: { $ref: "#/$defs/AgentCardSignature" } },
    iconUrl: { type: "string", format: "uri" },
  },
  additionalProperties: false,
  $defs: {
    AgentInterface: {
      type: "object",
      required: ["url", "protocolBinding", "protocolVersion"],
      properties: {
        url: { type: "string", format: "uri" },
        // Open-ended in A2A; the core bindings are these three.
        protocolBinding: { type: "string", minLength: 1 },
        tenant: { type: "string" },
        // Major.Minor, e.g. "1.0".
        protocolVersion: { type: "string", pattern: "^[0-9]+\\.[0-9]+$" },
      },
      additionalProperties: false,
    },
    AgentProvider: {
      type: "object",
      required: ["url", "organization"],
      properties: { url: { type: "string", format: "uri" }, organization: { type: "string", minLength: 1 } },
      additionalProperties: false,
    },
    AgentCapabilities: {
      type: "object",
      properties: {
        streaming: { type: "boolean" },
        pushNotifications: { type: "boolean" },
        extensions: { type: "array", items: { $ref: "#/$defs/AgentExtension" } },
        extendedAgentCard: { type: "boolean" },
      },
      additionalProperties: false,
    },
    AgentExtension: {
      type: "object",
      properties: {
        uri: { type: "string" },
        description: { type: "string" },
        required: { type: "boolean" },
        params: { type: "object" },
      },
      additionalProperties: false,
    },
    AgentSkill: {
      type: "object",
      required: ["id", "name", "description", "tags"],
      properties: {
        id: { type: "string", minLength: 1 },
        name: { type: "string" },
        description: { type: "string" },
        tags: strings,
        examples: strings,
        inputModes: mediaTypes,
        outputModes: mediaTypes,
        securityRequirements: { type: "array", items: securityRequirement },
      },
      additionalProperties: false,
    },
    AgentCardSignature: {
      type: "object",
      required: ["protected", "signature"],
      properties: { protected: { type: "string" }, signature: { type: "string" }, header: { type: "object" } },
      additionalProperties: false,
    },
  },
} as const;

/** A validator of A2A v1.0 Agent Cards (Ajv, strict, with formats); Ajv's errors in `errors`. */
export function a2aAgentCardValidator(): ValidateFunction {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  // ajv-formats is CommonJS: its default export is the plugin, or holds it.
  const addFormats = ((formats as unknown as { default?: typeof formats }).default ?? formats) as unknown as (
    a: Ajv2020,
  ) => void;
  addFormats(ajv);
  return ajv.compile(A2A_AGENT_CARD_SCHEMA);
}
