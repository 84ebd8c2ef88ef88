import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";

/** Every list member of the contract, by the object it belongs to. */
const DEFINITION_LISTS = ["skills", "defaultInputModes", "defaultOutputModes", "hostConfig"];
const SKILL_LISTS = ["tags", "inputModes", "outputModes"];
const HOST_CONFIG_LISTS = ["hostResources"];
const HOST_RESOURCE_LISTS = ["tools"];

/**
 * A definition whose every list, at every level, is sent empty (skills needs one item; that item's lists are
 * empty).
 */
const withEmptyLists = (name: string) =>
  minimalDefinition({
    name,
    defaultInputModes: [],
    defaultOutputModes: [],
    skills: [{ id: "s1", name: "Skill one", description: "The one thing", tags: [], inputModes: [], outputModes: [] }],
    hostConfig: [],
  });

forEachDatabase((db) => {
  const server = useServer(db);
  const post = (body: unknown) =>
    fetch(`${server().baseUrl}${PATH}`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const get = (id: string) =>
    fetch(`${server().baseUrl}${PATH}/${id}`, { headers: { authorization: server().authorization } });

  describe("empty lists", () => {
    it('reads back "tags": [] and "hostConfig": [] as sent, from POST and GET', async () => {
      const created = await post(withEmptyLists("Empty Lists Agent"));
      expect(created.status).toBe(201);
      const answered = await created.json();
      const read = await (await get(answered.id)).json();
      for (const body of [answered, read]) {
        expect(body.hostConfig).toEqual([]);
        expect(body.skills[0].tags).toEqual([]);
        expect(body.defaultInputModes).toEqual([]);
        expect(body.skills[0].inputModes).toEqual([]);
      }
    });

    it(
      "carries every list member of the contract at every nesting level, also when the client left it " + "out",
      async () => {
        const def = minimalDefinition({
          name: "Nested Lists Agent",
          skills: [{ id: "s1", name: "Skill one", description: "The one thing" }],
          hostConfig: [
            {
              skillId: "s1",
              executionMode: { id: "Mode=Delegate" },
              hostResources: [{ tool_name: "A tool", description: "Does it" }],
            },
          ],
        });
        const created = await post(def);
        expect(created.status).toBe(201);
        const { id } = await created.json();
        const read = await (await get(id)).json();
        for (const member of DEFINITION_LISTS) expect(read, member).toHaveProperty([member], expect.any(Array));
        for (const member of SKILL_LISTS) expect(read.skills[0], member).toHaveProperty([member], []);
        for (const member of HOST_CONFIG_LISTS)
          expect(read.hostConfig[0], member).toHaveProperty([member], expect.any(Array));
        for (const member of HOST_RESOURCE_LISTS)
          expect(read.hostConfig[0].hostResources[0], member).toHaveProperty([member], []);
        // Optional scalars keep their presence rules: never sent, never answered.
        expect(read).not.toHaveProperty("overview");
        expect(read).not.toHaveProperty("capabilities");
      },
    );

    it("shows the empty lists in a page of definitions too", async () => {
      await post(withEmptyLists("Empty Lists In A Page"));
      const page = await (
        await fetch(`${server().baseUrl}${PATH}?limit=100`, { headers: { authorization: server().authorization } })
      ).json();
      const item = page.data.find((d: { name: string }) => d.name === "Empty Lists In A Page");
      expect(item.hostConfig).toEqual([]);
      expect(item.skills[0].tags).toEqual([]);
    });

    it(
      "answers Connect JSON with the empty lists as sent, as REST does, which a Connect client reads as the empty " +
        "lists sent",
      async () => {
        const { id } = await (await post(withEmptyLists("Empty Lists Over Connect"))).json();
        const res = await fetch(`${server().baseUrl}/asor.v1.AgentDefinitionService/GetAgentDefinition`, {
          method: "POST",
          headers: {
            authorization: server().authorization,
            "content-type": "application/json",
            "connect-protocol-version": "1",
          },
          body: JSON.stringify({ id }),
        });
        expect(res.status).toBe(200);
        // The stored JSON, as REST answers it (README, Decisions): a protobuf JSON parser reads `[]` as an empty list.
        const body = await res.json();
        expect(body.id).toBe(id);
        expect(body.hostConfig).toEqual([]);
        const client = createClient(
          AgentDefinitionService,
          createConnectTransport({
            baseUrl: server().baseUrl,
            httpVersion: "1.1",
            useBinaryFormat: false,
            interceptors: [withAuthorization(server().authorization)],
          }),
        );
        const parsed = await client.getAgentDefinition({ id });
        expect(parsed.id).toBe(id);
        expect(parsed.hostConfig).toEqual([]);
        expect(parsed.skills[0]?.tags).toEqual([]);
      },
    );
  });
});
