/**
 * `asor import a2a`: the live card of an A2A agent served by @a2a-js/sdk's own card handler on loopback, read
 * where a2a-js's resolver looks, written as a definition file that `asor validate` passes; what does not map is
 * named on stderr. A card that cannot be read: exit 3; a card missing what a definition needs: exit 1.
 */
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { AgentCard } from "@a2a-js/sdk";
import { agentCardHandler } from "@a2a-js/sdk/server/express";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asor, tempDir } from "../support/cli.js";

const card = (url: string, organization: string | undefined): AgentCard =>
  ({
    name: "Recipe Agent",
    description: "Finds recipes for the ingredients at hand",
    version: "1.2.0",
    protocolVersion: "1.0",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    ...(organization === undefined ? {} : { provider: { organization, url: "https://recipes.example" } }),
    capabilities: { streaming: true, extensions: [] },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [
      {
        id: "find",
        name: "Find a recipe",
        description: "Finds a recipe from a list of ingredients",
        tags: ["cooking", "recipes"],
        examples: ["What can I make with eggs and spinach?"],
      },
    ],
  }) as unknown as AgentCard;

describe("asor import a2a", () => {
  let server: Server;
  let base = "";
  let dir = "";
  let remove = async () => {};
  beforeAll(async () => {
    ({ dir, remove } = await tempDir());
    const app = express();
    server = app.listen(0, "127.0.0.1");
    await once(server, "listening");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const provider = (org: string | undefined) =>
      agentCardHandler({ agentCardProvider: async () => card(`${base}/a2a/v1`, org) });
    app.use("/a2a/.well-known/agent-card.json", provider("Recipe Co"));
    app.use("/anonymous/.well-known/agent-card.json", provider(undefined));
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await remove();
  });

  it("writes a valid definition from the live card, and names what it could not map", async () => {
    const file = join(dir, "recipe-agent.json");
    const run = await asor(["import", "a2a", `${base}/a2a/v1`, "-o", file]);
    expect(run.code, run.stderr).toBe(0);
    const def = JSON.parse(await readFile(file, "utf8"));
    expect(def).toEqual({
      name: "Recipe Agent",
      description: "Finds recipes for the ingredients at hand",
      version: "1.2.0",
      url: `${base}/a2a/v1`,
      provider: { id: "Provider=Recipe_Co" },
      capabilities: { streaming: true },
      defaultInputModes: [{ type: "text/plain" }],
      defaultOutputModes: [{ type: "text/plain" }, { type: "application/json" }],
      skills: [
        {
          id: "find",
          name: "Find a recipe",
          description: "Finds a recipe from a list of ingredients",
          tags: [{ tag: "cooking" }, { tag: "recipes" }],
        },
      ],
    });
    for (const path of ["skills[0].examples", "provider.url", "capabilities.extensions", "protocolVersion"])
      expect(run.stderr).toContain(`not mapped: ${path}`);
    expect(run.stderr).toContain('became provider.id "Provider=Recipe_Co"');
    const valid = await asor(["validate", file]);
    expect(valid.code, valid.stdout).toBe(0);
  });

  it("without -o prints to stdout; exit 1 with the problems when the card lacks what is required", async () => {
    const run = await asor(["import", "a2a", `${base}/anonymous/v1`]);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ name: "Recipe Agent", url: `${base}/a2a/v1` });
    expect(run.stderr).toContain("provider: REQUIRED");
  });

  it("exits 3 when there is no card at the address, naming where it looked", async () => {
    const run = await asor(["import", "a2a", `${base}/nothing/here`]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`${base}/nothing/.well-known/agent-card.json`);
    expect(run.stderr).toContain("HTTP_STATUS");
  });
});
