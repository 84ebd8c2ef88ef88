/**
 * The rules of a definition beyond its message's own (protovalidate's, validation.ts contractIssues): its
 * identifying text, its rules across members, the host platform rule. The service checks every PUT and POST
 * with them (service/registry-service.ts), and `asor validate` checks files offline with the same function.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { Issue } from "./errors.js";
import { type HostIdentity, hostPlatformIssues } from "./host-platform.js";
import { identifyingTextIssues } from "./identifying-text.js";
import { crossFieldIssues } from "./validation.js";

/** Both lists as one; the empty list is the shared one when both are (a valid request allocates no list). */
export function joinIssues(a: readonly Issue[], b: readonly Issue[]): readonly Issue[] {
  return a.length === 0 ? b : b.length === 0 ? a : [...a, ...b];
}

/** The issues of `def` beyond its message's rules: identifying text, then across fields, then A161. */
export function definitionRuleIssues(def: AgentDefinition, host: HostIdentity): readonly Issue[] {
  return joinIssues(joinIssues(identifyingTextIssues(def), crossFieldIssues(def)), hostPlatformIssues(def, host));
}
