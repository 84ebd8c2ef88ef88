/**
 * A valid definition that has every member of the contract once, so a test
 * can push any one member to its limit and still send a definition the
 * service accepts. `tag` keeps the upsert key and the externalAgentID of
 * different tests apart.
 */
export function fullDefinition(tag: string): Record<string, any> {
  return {
    name: `Full Agent ${tag}`,
    description: "Has every member",
    url: "https://agents.example.com/full",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    platform: { id: "Platform=OTHER" },
    skills: [
      {
        id: "s1",
        name: "Skill one",
        description: "The one thing",
        tags: [{ tag: "one" }],
        inputModes: [{ type: "text/plain" }],
        outputModes: [{ type: "application/json" }],
      },
    ],
    capabilities: { pushNotifications: true, streaming: false, stateTransitionHistory: true },
    overview: "An overview",
    iconUrl: "https://agents.example.com/icon.png",
    documentationUrl: "https://agents.example.com/docs",
    externalAgentID: `ext-${tag}`,
    externalTenantID: "partner-tenant",
    defaultInputModes: [{ type: "text/plain" }],
    defaultOutputModes: [{ type: "text/plain" }],
    supportsAuthenticatedExtendedCard: false,
    hostConfig: [
      {
        skillId: "s1",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [
          {
            tool_name: "GET /workers",
            description: "Reads workers",
            agent_resource: { id: "resource-1", descriptor: "Read workers", type: "AGENT_ACTION" },
            tools: [{ id: "datasource-1" }],
          },
        ],
      },
    ],
  };
}
