/**
 * What a signature of an agent card signs (A2A v1.0 §8.4.1): the card without `signatures`, under the field
 * presence rules of its proto, in the RFC 8785 (JCS) form, as UTF-8 bytes. Pure: the registry signs the bytes
 * of the cards it serves with it, and a verifier of a signed card (or of a submitted definition: `presenceJson`
 * takes any message) rebuilds them with it.
 *
 * The presence rules (§8.4.1 rule 1): a proto `optional` field is kept when set, even to its default; a
 * REQUIRED field is always kept (an empty `tags` list, an empty `capabilities` object); any other field holding
 * its default is left out (an empty list, `""`, `false`). @a2a-js/sdk's canonicalization differs where a
 * REQUIRED member is empty: it drops every `""`, `[]` and `{}` (`cleanEmpty`), so a card with a skill without
 * tags, no skills, or no capability set verifies here and not there (docs/decisions/issue-43.md).
 */
import {
  type DescField,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import canonicalize from "canonicalize";
import { type AgentCard, AgentCardSchema } from "../../gen/asor/v1/agent_card_pb.js";

/** The A2A `AgentCard`'s REQUIRED members (`google.api.field_behavior`), by the proto's full field name. */
const A2A_CARD_REQUIRED = new Set([
  "asor.v1.AgentCard.name",
  "asor.v1.AgentCard.description",
  "asor.v1.AgentCard.supported_interfaces",
  "asor.v1.AgentCard.version",
  "asor.v1.AgentCard.capabilities",
  "asor.v1.AgentCard.default_input_modes",
  "asor.v1.AgentCard.default_output_modes",
  "asor.v1.AgentCard.skills",
  "asor.v1.AgentInterface.url",
  "asor.v1.AgentInterface.protocol_binding",
  "asor.v1.AgentInterface.protocol_version",
  "asor.v1.AgentProvider.url",
  "asor.v1.AgentProvider.organization",
  "asor.v1.AgentSkill.id",
  "asor.v1.AgentSkill.name",
  "asor.v1.AgentSkill.description",
  "asor.v1.AgentSkill.tags",
]);

/** Whether A2A marks `field` of an agent card REQUIRED. */
export const isA2aCardRequired = (field: DescField): boolean =>
  A2A_CARD_REQUIRED.has(`${field.parent.typeName}.${field.name}`);

/**
 * The JSON of `message` under the presence rules: protobuf JSON (an implicit-presence field at its default left
 * out, an explicit-presence one kept when set), with each field `isRequired` says is REQUIRED added at its
 * default when absent, at every depth.
 */
export function presenceJson<Desc extends DescMessage>(
  desc: Desc,
  message: Parameters<typeof toJson<Desc>>[1],
  isRequired: (field: DescField) => boolean,
): JsonObject {
  const json = toJson(desc, message) as JsonObject;
  addRequired(desc, json, isRequired);
  return json;
}

function addRequired(desc: DescMessage, json: JsonObject, isRequired: (field: DescField) => boolean): void {
  for (const field of desc.fields) {
    if (json[field.jsonName] === undefined && isRequired(field)) json[field.jsonName] = defaultJson(field);
    const value = json[field.jsonName];
    const inner = field.message;
    // A well-known type's JSON (Struct, Timestamp) is not its fields'.
    if (value === undefined || inner === undefined || inner.typeName.startsWith("google.protobuf.")) continue;
    const objects =
      field.fieldKind === "list"
        ? (value as JsonObject[])
        : field.fieldKind === "map"
          ? Object.values(value as JsonObject)
          : [value];
    for (const object of objects) addRequired(inner, object as JsonObject, isRequired);
  }
}

/** The JSON of `field` at its default: what a REQUIRED field left unset reads as. */
function defaultJson(field: DescField): JsonValue {
  if (field.fieldKind === "list") return [];
  if (field.fieldKind === "map" || field.fieldKind === "message") return {};
  if (field.fieldKind === "enum") return field.enum.values[0]?.name ?? 0;
  switch (field.scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return "0";
    default:
      return 0;
  }
}

/** The RFC 8785 (JCS) form of `json`. */
export function jcs(json: JsonValue): string {
  const text = canonicalize(json);
  if (text === undefined) throw new TypeError("JCS has no form of this value.");
  return text;
}

const utf8 = new TextEncoder();

/** The bytes a signature of `card` signs: its JCS form without `signatures`, under A2A's presence rules. */
export function agentCardPayload(card: AgentCard): Uint8Array<ArrayBuffer> {
  const json = presenceJson(AgentCardSchema, card, isA2aCardRequired);
  delete json.signatures;
  return utf8.encode(jcs(json));
}

/**
 * The bytes a signature of the card whose JSON is `json` signs (its `signatures`, if any, set aside). Throws
 * (protobuf-es's error) on a member the card's proto does not have: a signature cannot vouch for what the
 * registry cannot put back in canonical form.
 */
export function agentCardJsonPayload(json: JsonObject): Uint8Array<ArrayBuffer> {
  const { signatures: _signatures, ...unsigned } = json;
  return agentCardPayload(fromJson(AgentCardSchema, unsigned));
}
