import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Issue, issueAt } from "./errors.js";

/** The host system's own provider and platform ids (configurable). */
export interface HostIdentity {
  readonly providerId: string;
  readonly platformId: string;
}

/** A161: a third-party agent (any provider but the host's) may not select the host system as its platform. */
export function hostPlatformIssues(def: AgentDefinition, host: HostIdentity): Issue[] {
  if (def.platform?.id !== host.platformId || def.provider?.id === host.providerId) return [];
  return [
    issueAt(
      "platform.id",
      "A161",
      `platform.id "${host.platformId}" is the host system, which a third-party agent cannot select; choose ` +
        `another platform (Platform=OTHER if none fits).`,
    ),
  ];
}
