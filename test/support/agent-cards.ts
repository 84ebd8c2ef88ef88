/**
 * The A2A agent cards the registry must answer for the test fixtures
 * (definitions.ts, full-definition.ts), written out by hand from the mapping
 * README.md documents ("Agent card"): what the unit and end-to-end tests
 * compare with, member by member.
 */

/** The card of the spec's example definition (`exampleDefinition()`), of any version. */
export function exampleCard(version = "1.0.0"): Record<string, unknown> {
  return {
    name: "Customer Service Intelligence Agent",
    description: "Multi-skilled agent for customer service automation and intelligence",
    supportedInterfaces: [{ url: "https://acme.com/agent/cust", protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    // Provider=MyOrg, and the origin of the agent's url for want of a provider url.
    provider: { organization: "MyOrg", url: "https://acme.com" },
    version,
    documentationUrl: "https://agent.company.com/agent1/doc",
    capabilities: { streaming: true },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["application/ms-excel", "text/plain"],
    skills: [
      {
        id: "sentiment_analysis",
        name: "Customer Sentiment Analysis",
        description: "Analyzes customer communication sentiment and emotional state",
        tags: ["cognitive"],
        outputModes: ["application/json"],
      },
      {
        id: "ticket_routing",
        name: "Intelligent Ticket Routing",
        description: "Routes customer tickets to appropriate departments",
        tags: ["integration"],
      },
    ],
  };
}

/** The card of `fullDefinition(tag)`: every member a card can carry. */
export function fullCard(tag: string): Record<string, unknown> {
  return {
    name: `Full Agent ${tag}`,
    description: "Has every member",
    supportedInterfaces: [
      { url: "https://agents.example.com/full", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
    ],
    provider: { organization: "Acme", url: "https://agents.example.com" },
    version: "1.0.0",
    documentationUrl: "https://agents.example.com/docs",
    iconUrl: "https://agents.example.com/icon.png",
    // stateTransitionHistory has no A2A v1.0 member; supportsAuthenticatedExtendedCard is extendedAgentCard,
    // false kept.
    capabilities: { pushNotifications: true, streaming: false, extendedAgentCard: false },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "s1",
        name: "Skill one",
        description: "The one thing",
        tags: ["one"],
        inputModes: ["text/plain"],
        outputModes: ["application/json"],
      },
    ],
  };
}

/** The card of `minimalDefinition()`: A2A's required members filled by the documented defaults. */
export function minimalCard(): Record<string, unknown> {
  return {
    name: "Minimal Agent",
    description: "Does one thing",
    supportedInterfaces: [
      { url: "https://agents.example.com/minimal", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
    ],
    provider: { organization: "Acme", url: "https://agents.example.com" },
    version: "1.0.0",
    capabilities: {},
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "s1", name: "Skill one", description: "The one thing", tags: [] }],
  };
}
