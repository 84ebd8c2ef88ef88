/**
 * An Agent Definition as an A2A protocol v1.0 Agent Card (issue 11, item 7):
 * the pure mapping from the stored definition to `asor.v1.AgentCard`, whose
 * members carry the JSON names of A2A's `AgentCard`, and what an HTTP answer
 * of it carries besides (its JSON with A2A's required lists, ETag,
 * Cache-Control). README.md ("Agent card") documents the mapping.
 */
import { create, type JsonObject, toJson } from "@bufbuild/protobuf";
import { type AgentCard, AgentCardSchema } from "../../gen/asor/v1/agent_card_pb.js";
import type { AgentDefinition, MimeType } from "../../gen/asor/v1/agent_definition_pb.js";
import { descriptorOf } from "./derived-fields.js";
import type { InstanceRef } from "./records.js";

/** The A2A protocol version every interface of a card names. */
export const A2A_PROTOCOL_VERSION = "1.0";

/**
 * The A2A protocol binding of the definition's `url`. A definition does not
 * say which binding its agent speaks; JSON-RPC is the one every A2A agent
 * offered before v1.0 (v0.3's default `preferredTransport`).
 */
export const DEFAULT_PROTOCOL_BINDING = "JSONRPC";

/** The media type of the default modes when a definition declares none: text, which every A2A agent exchanges. */
export const DEFAULT_MEDIA_TYPE = "text/plain";

/**
 * How a client may reuse a card (A2A v1.0, "Agent Card caching"): `no-cache`,
 * so every reuse is revalidated with the card's ETag (`If-None-Match`, 304
 * when unchanged) and a deactivation (410) or a change reaches the client at
 * once, never after a max-age. `private`: the answer is for the token that
 * asked, and shared caches must not hand it to others.
 */
export const AGENT_CARD_CACHE_CONTROL = "private, no-cache";

/** The card format, in the ETag: a change of the mapping must change every ETag. */
const CARD_FORMAT = "card1";

const types = (modes: readonly MimeType[]): string[] => modes.map((m) => m.type);

/**
 * The provider's website: its `href` when it has one, else the origin of the agent's `url` (or the `url`
 * itself when it has none, as a URN).
 */
function providerUrl(def: AgentDefinition): string {
  if (def.provider?.href) return def.provider.href;
  try {
    const origin = new URL(def.url).origin;
    return origin === "null" ? def.url : origin;
  } catch {
    return def.url;
  }
}

/**
 * The A2A v1.0 Agent Card of `def` (a stored definition, read-only members
 * included). Pure. Capabilities the definition does not set are left out;
 * `stateTransitionHistory` has no A2A v1.0 counterpart and is dropped.
 */
export function renderAgentCard(def: AgentDefinition): AgentCard {
  const capabilities = def.capabilities;
  const inputModes = types(def.defaultInputModes);
  const outputModes = types(def.defaultOutputModes);
  return create(AgentCardSchema, {
    name: def.name,
    description: def.description,
    supportedInterfaces: [
      { url: def.url, protocolBinding: DEFAULT_PROTOCOL_BINDING, protocolVersion: A2A_PROTOCOL_VERSION },
    ],
    ...(def.provider === undefined
      ? {}
      : {
          provider: { organization: def.provider.descriptor || descriptorOf(def.provider.id), url: providerUrl(def) },
        }),
    version: def.version,
    ...(def.documentationUrl === undefined ? {} : { documentationUrl: def.documentationUrl }),
    capabilities: {
      ...(capabilities?.streaming === undefined ? {} : { streaming: capabilities.streaming }),
      ...(capabilities?.pushNotifications === undefined ? {} : { pushNotifications: capabilities.pushNotifications }),
      ...(def.supportsAuthenticatedExtendedCard === undefined
        ? {}
        : { extendedAgentCard: def.supportsAuthenticatedExtendedCard }),
    },
    defaultInputModes: inputModes.length > 0 ? inputModes : [DEFAULT_MEDIA_TYPE],
    defaultOutputModes: outputModes.length > 0 ? outputModes : [DEFAULT_MEDIA_TYPE],
    skills: def.skills.map((skill) => ({
      id: skill.id,
      name: skill.name,
      description: skill.description,
      tags: skill.tags.map((t) => t.tag),
      inputModes: types(skill.inputModes),
      outputModes: types(skill.outputModes),
    })),
    ...(def.iconUrl === undefined ? {} : { iconUrl: def.iconUrl }),
  });
}

/**
 * The card's JSON as a REST answer carries it: protobuf JSON (empty lists
 * and unset members left out), plus the lists A2A requires whether or not
 * they are empty, so a strict A2A client finds every required member. Only
 * a skill's `tags` can be empty: the other required lists never are.
 */
export function agentCardJson(card: AgentCard): JsonObject {
  const json = toJson(AgentCardSchema, card) as JsonObject;
  json.skills = card.skills.map((skill, i) => ({
    ...((json.skills as JsonObject[] | undefined)?.[i] ?? {}),
    tags: skill.tags,
  }));
  return json;
}

/**
 * The card's strong ETag: it changes whenever the version's revision does
 * (every change of content or status). Not the definition's own ETag: the
 * card is another representation, and its format may change on its own.
 */
export function agentCardEtag(version: Pick<InstanceRef, "id" | "revision">): string {
  return `"${CARD_FORMAT}-${version.id}-${version.revision}"`;
}
