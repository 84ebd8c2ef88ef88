/** The tables the queries name (migrations 0001-0005, 0015, 0018-0021 made them). */
export const tenants = "tenants";
export const agents = "agents";
export const externalIds = "agent_external_ids";
export const definitions = "agent_definitions";
export const tenantRevisions = "tenant_revisions";
export const definitionChanges = "definition_changes";
export const providerKeys = "provider_keys";
export const providerKeySets = "provider_key_sets";
export const tenantSettings = "tenant_settings";
export const definitionLiveness = "definition_liveness";
