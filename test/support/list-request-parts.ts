import type { ListRequestParts } from "../../src/domain/list-query.js";

/** A list request as parseListQuery reads it: no filter, 20 a page, with `parts` over that. */
export function listRequestParts(parts: Partial<ListRequestParts> = {}): ListRequestParts {
  return {
    limit: 20,
    name: [],
    provider: [],
    platform: [],
    version: [],
    tag: [],
    skillId: [],
    executionMode: [],
    resource: [],
    externalAgentId: [],
    status: [],
    ...parts,
  };
}
