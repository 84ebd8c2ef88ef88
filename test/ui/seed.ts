/**
 * The definitions the catalog's browser tests read, registered through the REST API as any client would: a
 * page and a half of fillers, an agent with two versions whose skills use host resources, and a hostile one
 * with HTML and script in every text member.
 */

/** The script every hostile member carries: it would open a dialog, and set a global, if it ever ran. */
export const HOSTILE =
  `<img src=x onerror="alert('img');window.__pwned=1">` + `<script>alert('script');window.__pwned=1</script>`;

export const FILLERS = 24;

export function filler(n: number): Record<string, unknown> {
  const nn = String(n).padStart(2, "0");
  return {
    name: `Filler Agent ${nn}`,
    description: `Filler number ${nn}, for paging`,
    url: `https://agents.example.com/filler-${nn}`,
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    platform: { id: "Platform=OTHER" },
    skills: [{ id: "chat", name: "Chat", description: "Talks", tags: [{ tag: "general" }] }],
  };
}

/** Version 1 of the invoice agent: one skill with two host resources. */
export function invoiceV1(): Record<string, unknown> {
  return {
    name: "Invoice Agent",
    description: "Creates and sends invoices",
    url: "https://agents.example.com/invoice",
    version: "1.0.0",
    provider: { id: "Provider=Globex" },
    platform: { id: "Platform=OTHER" },
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: [{ type: "text/plain" }],
    defaultOutputModes: [{ type: "application/json" }],
    skills: [
      {
        id: "bill",
        name: "Bill a customer",
        description: "Creates an invoice for a customer",
        tags: [{ tag: "finance" }, { tag: "billing" }],
      },
    ],
    hostConfig: [
      {
        skillId: "bill",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [
          {
            tool_name: "POST /invoices",
            description: "Creates an invoice",
            agent_resource: { id: "Invoice=Create" },
            tools: [{ id: "ledger-2024" }],
          },
          { tool_name: "GET /customers", description: "Reads customers", agent_resource: { id: "Customer=Read" } },
        ],
      },
    ],
  };
}

/** Version 2: a second skill (refunds), with a resource of its own. */
export function invoiceV2(): Record<string, unknown> {
  const v1 = invoiceV1() as { skills: unknown[]; hostConfig: unknown[] };
  return {
    ...v1,
    version: "2.0.0",
    skills: [
      ...v1.skills,
      { id: "refund", name: "Refund a payment", description: "Pays money back", tags: [{ tag: "finance" }] },
    ],
    hostConfig: [
      ...v1.hostConfig,
      {
        skillId: "refund",
        executionMode: { id: "Mode=Ambient" },
        hostResources: [
          { tool_name: "POST /refunds", description: "Refunds", agent_resource: { id: "Refund=Create" } },
        ],
      },
    ],
  };
}

/** HTML and script in every text member a page shows. */
export function hostile(): Record<string, unknown> {
  return {
    name: `Hostile ${HOSTILE}`,
    description: `Description ${HOSTILE}`,
    url: "https://agents.example.com/hostile",
    version: `9.9.9-${HOSTILE}`,
    provider: { id: "Provider=<script>alert('provider')</script>" },
    platform: { id: "Platform=<b>bold</b>" },
    overview: `Overview ${HOSTILE}`,
    documentationUrl: "javascript:alert('doc')",
    iconUrl: "https://agents.example.com/icon.png",
    externalAgentID: `ext ${HOSTILE}`,
    skills: [
      {
        id: "evil",
        name: `Skill ${HOSTILE}`,
        description: `Skill description ${HOSTILE}`,
        tags: [{ tag: `tag${HOSTILE}` }],
      },
    ],
    hostConfig: [
      {
        skillId: "evil",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [
          {
            tool_name: `Tool ${HOSTILE}`,
            description: `Tool description ${HOSTILE}`,
            agent_resource: { id: "Evil=Resource", descriptor: `Descriptor ${HOSTILE}` },
          },
        ],
      },
    ],
  };
}
