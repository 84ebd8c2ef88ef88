/**
 * The definition every scenario reads and writes: the shape of the spec's
 * example (two skills, tags, modes, host resources with tools), about 2 KB of
 * JSON, so that parsing, validation and derived ids cost what a real
 * definition costs.
 */

/** The provider and version of every bench definition; the name tells them apart. */
export const BENCH_PROVIDER = "Provider=Bench";
export const BENCH_VERSION = "1.0.0";

/** The overview of every bench definition as created; updates add an edition to it (benchOverview). */
export const BENCH_OVERVIEW = "Welcome to the Customer Service Agent. How may I assist you?";

/**
 * The overview of an update's body: a new word each time, so that every
 * update changes the definition. The same content again is no change (no
 * write, the revision stays: issue 11), and an update scenario that sent it
 * would measure a read.
 */
export function benchOverview(edition: string): string {
  return `${BENCH_OVERVIEW} Edition ${edition}.`;
}

/** A bench definition named `name`, as a client would POST it. */
export function benchDefinition(name: string): Record<string, unknown> {
  return {
    name,
    description: "Multi-skilled agent for customer service automation and intelligence",
    url: "https://agents.example.com/bench/customer-service",
    provider: { id: BENCH_PROVIDER },
    platform: { id: "Platform=OTHER" },
    version: BENCH_VERSION,
    overview: BENCH_OVERVIEW,
    documentationUrl: "https://agents.example.com/bench/customer-service/doc",
    capabilities: { streaming: true },
    defaultInputModes: [{ type: "text/plain" }],
    defaultOutputModes: [{ type: "application/ms-excel" }, { type: "text/plain" }],
    skills: [
      {
        id: "sentiment_analysis",
        name: "Customer Sentiment Analysis",
        description: "Analyzes customer communication sentiment and emotional state",
        outputModes: [{ type: "application/json" }],
        tags: [{ tag: "cognitive" }, { tag: "support" }],
      },
      {
        id: "ticket_routing",
        name: "Intelligent Ticket Routing",
        description: "Routes customer tickets to appropriate departments",
        tags: [{ tag: "integration" }],
      },
    ],
    hostConfig: [
      {
        skillId: "sentiment_analysis",
        executionMode: { id: "Mode=Ambient" },
        hostResources: [
          {
            tool_name: "GET Workers API",
            description: "Gets workers at the organization level",
            agent_resource: { id: "94a39e71541b468fa895955508287acd" },
          },
          {
            tool_name: "GET: query using the Active Employees data source",
            description: "Gets worker information based on defined queries",
            agent_resource: { id: "3e15b2a1676d10000c9572ea9cc264b3" },
            tools: [{ id: "845b47537cfc47b29da4f385628a5fe2" }],
          },
        ],
      },
      {
        skillId: "ticket_routing",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [
          {
            tool_name: "Case Types GET",
            description: "Reads all case types in the help application",
            agent_resource: { id: "94f4c8460640100019b5cf1caa7d0019" },
          },
        ],
      },
    ],
  };
}

/** The placeholder in `benchBodyTemplate` where a request's name goes. */
export const NAME_PLACEHOLDER = "\u0000NAME\u0000";

/**
 * The POST body as a JSON string with a placeholder for the name: the load
 * generator fills it in per request with one string replace, so that making
 * bodies costs the client next to nothing.
 */
export function benchBodyTemplate(): string {
  return JSON.stringify(benchDefinition(NAME_PLACEHOLDER));
}

/** The POST body for `name`, from `benchBodyTemplate()`; with `edition`, an update's (benchOverview). */
export function benchBody(template: string, name: string, edition?: string): string {
  const body = template.replace(JSON.stringify(NAME_PLACEHOLDER).slice(1, -1), JSON.stringify(name).slice(1, -1));
  return edition === undefined ? body : body.replace(BENCH_OVERVIEW, benchOverview(edition));
}
