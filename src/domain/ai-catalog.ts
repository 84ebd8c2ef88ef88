/**
 * A tenant's agents as an AI Catalog document (AI Catalog v0.9; issue 45, item 2). Pure: the service hands it the
 * newest ACTIVE version of each agent. The specification's rules it follows (its `specification/ai-catalog.md`):
 * - an entry's `identifier` is kept as the publisher gave it when it is a `urn:air:` one (here: the definition's
 *   `externalAgentID`, when it is one); otherwise an operator that is not the publisher uses an identifier of its
 *   own, stable across versions and URLs and never reused: `urn:asor:agent:{tenant}:{reference}`;
 * - `url` (exactly one of `url` / `data`) is where the artifact is, served with the entry's `type`: the agent's
 *   card at its A2A base URL (`application/a2a-agent-card+json`);
 * - `displayName`, `description` and `version` are left out, as the specification asks when the card carries them
 *   (they would drift from it); `publisher` is the agent's provider;
 * - `digest` is left out: a card served signed (ES256 signatures are randomized) has no one digest across replicas.
 */
import { create } from "@bufbuild/protobuf";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  type AiCatalog,
  type AiCatalogEntry,
  AiCatalogEntrySchema,
  AiCatalogSchema,
} from "../../gen/asor/v1/ai_catalog_pb.js";
import { descriptorOf } from "./derived-fields.js";

/** The AI Catalog specification version the documents follow. */
export const AI_CATALOG_SPEC_VERSION = "0.9";
/** The media type of an AI Catalog document. */
export const AI_CATALOG_MEDIA_TYPE = "application/ai-catalog+json";
/** The type of an entry whose `url` serves an A2A agent card. */
export const A2A_CARD_ENTRY_TYPE = "application/a2a-agent-card+json";

/** An agent's A2A base URL in the registry (GetAgentBaseCard's), with its trailing slash. */
export function agentBaseUrl(base: string, tenant: string, referenceId: string): string {
  const agent = referenceId.replace(/^Agent_ID=/, "");
  return `${base}/a2a/${encodeURIComponent(tenant)}/${encodeURIComponent(agent)}/`;
}

/** The catalog entry of an agent, from its newest ACTIVE version. */
export function aiCatalogEntry(
  def: AgentDefinition,
  where: { readonly base: string; readonly tenant: string; readonly referenceId: string; readonly updatedAt: Date },
): AiCatalogEntry {
  const { base, tenant, referenceId, updatedAt } = where;
  const own = def.externalAgentId?.startsWith("urn:air:") === true ? def.externalAgentId : undefined;
  const agent = referenceId.replace(/^Agent_ID=/, "");
  return create(AiCatalogEntrySchema, {
    identifier: own ?? `urn:asor:agent:${tenant}:${agent}`,
    type: A2A_CARD_ENTRY_TYPE,
    url: `${agentBaseUrl(base, tenant, referenceId)}.well-known/agent-card.json`,
    ...(def.provider === undefined
      ? {}
      : {
          publisher: {
            identifier: def.provider.id,
            displayName: def.provider.descriptor || descriptorOf(def.provider.id),
          },
        }),
    updatedAt: updatedAt.toISOString(),
  });
}

/** The document of `entries`, served by the registry at `base`. */
export function aiCatalog(base: string, entries: readonly AiCatalogEntry[]): AiCatalog {
  return create(AiCatalogSchema, {
    specVersion: AI_CATALOG_SPEC_VERSION,
    host: { displayName: "Agent Definition Registry", identifier: base },
    entries: [...entries],
  });
}
