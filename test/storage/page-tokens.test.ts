/**
 * A page token carries the last row's order value: ordered by name, the name
 * (up to 255 characters, each up to four bytes of UTF-8 or six of escaped
 * JSON), so a token is longer than 1,024 characters, the limit `pageToken`
 * had, and the service refused its own next token.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { host } from "./fixtures.js";

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  const names = ["\u{1F600}", "\u{1F601}", "\u{1F602}"].map((c) => c.repeat(255));

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    service = createRegistryService({ repository: repo, host });
    for (const name of names) {
      const def = create(AgentDefinitionSchema, {
        name,
        description: "A long name.",
        url: "https://agents.example.com/long",
        version: "1.0.0",
        provider: { id: "Provider=Acme" },
        skills: [{ id: "s", name: "S", description: "D" }],
      });
      await service.upsert("default", create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }));
    }
  });
  afterAll(() => repo?.close());

  it("pages by name through names of 255 four-byte characters, each page's token taken back", async () => {
    const seen: string[] = [];
    let pageToken: string | undefined;
    let longest = 0;
    do {
      const page = await service.list(
        "default",
        create(ListAgentDefinitionsRequestSchema, { orderBy: "name", limit: 1, ...(pageToken ? { pageToken } : {}) }),
      );
      seen.push(...page.data.map((s) => s.id));
      pageToken = page.nextPageToken;
      longest = Math.max(longest, pageToken?.length ?? 0);
    } while (pageToken !== undefined && seen.length <= names.length);
    expect(longest).toBeGreaterThan(1024);
    expect(new Set(seen).size).toBe(names.length);
  });
});
