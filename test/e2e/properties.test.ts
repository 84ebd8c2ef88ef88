import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { allCodes } from "../../src/domain/errors.js";
import { withAuthorization } from "../support/auth.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { testDatabases } from "../support/databases.js";
import { brokenDefinition, brokenText, validDefinition } from "../support/definition-arbitraries.js";
import { withoutReadOnly } from "../support/definitions.js";
import { useServer } from "../support/server.js";

/**
 * Generated definitions against a real server on SQLite (in this process,
 * to keep the run short): valid ones come back exactly as sent, over REST
 * and Connect; invalid ones are a 4xx in the spec's error shape, never a
 * 5xx and never a dropped connection. Runs add up to 2,500 cases; a failure
 * prints its seed and the shrunk counterexample (replay with `seed`/`path`).
 */
const RUNS = {
  restValid: 500,
  connectValid: 400,
  restInvalid: 600,
  restText: 300,
  connectInvalid: 350,
  connectText: 200,
  binaryGarbage: 150,
};

const PATH = "/api/asor/v1/default/agentDefinition";
const KNOWN_CODES = new Set(Object.keys(allCodes()));

let counter = 0;
/** A tag unique in this run: keeps upsert keys and externalAgentIDs of different cases apart. */
const unique = () => `P${++counter}`;

/**
 * Checks the spec's validation error body: `{error, errors: [{error, code, field?, path?}]}` with documented
 * codes only.
 */
function expectValidationBody(body: any, context: string): void {
  expect(typeof body?.error, context).toBe("string");
  expect(Array.isArray(body.errors) && body.errors.length > 0, context).toBe(true);
  for (const item of body.errors) {
    expect(
      Object.keys(item).every((k) => ["error", "code", "field", "path"].includes(k)),
      context,
    ).toBe(true);
    expect(typeof item.error, context).toBe("string");
    expect(KNOWN_CODES.has(item.code), `${context}: undocumented code ${item.code}`).toBe(true);
  }
}

// A fixed number of cases, each a real write (SQLite with synchronous = FULL): 20 s on a quiet machine, past
// the default 30 s when other work shares its two cores. The budget is for the work, not a wait for luck.
describe("generated definitions, on sqlite", { timeout: 120_000 }, () => {
  const server = useServer(testDatabases()[0]!);
  const headers = () => ({ authorization: server().authorization, "content-type": "application/json" });
  const postRest = (body: string | Uint8Array) =>
    fetch(`${server().baseUrl}${PATH}`, { method: "POST", headers: headers(), body: body as BodyInit });
  const getRest = async (id: string) =>
    (await fetch(`${server().baseUrl}${PATH}/${id}`, { headers: headers() })).json();

  /** A REST answer to an invalid request: a 4xx with the validation body (the connection held: fetch resolved). */
  const expectRestRefusal = async (res: Response, kind: string) => {
    const text = await res.text();
    const context = `${kind}: ${res.status} ${text.slice(0, 300)}`;
    expect(res.status >= 400 && res.status < 500, context).toBe(true);
    expectValidationBody(JSON.parse(text), context);
  };

  /** A Connect answer to an invalid request: a 4xx with a ValidationError detail. */
  const expectConnectRefusal = (answer: { status: number; body: any; validation: any }, kind: string) => {
    const context = `${kind}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`;
    expect(answer.status >= 400 && answer.status < 500, context).toBe(true);
    expectValidationBody(answer.validation, context);
  };

  it(`REST: ${RUNS.restValid} valid definitions come back from POST and GET exactly as sent`, async () => {
    await fc.assert(
      fc.asyncProperty(validDefinition(unique), async (def) => {
        const res = await postRest(JSON.stringify(def));
        const body = await res.json();
        expect(res.status, JSON.stringify(body).slice(0, 500)).toBe(201);
        expect(withoutReadOnly(body)).toEqual(def);
        expect(withoutReadOnly(await getRest(body.id))).toEqual(def);
      }),
      { numRuns: RUNS.restValid },
    );
  });

  it(
    `Connect (JSON and binary): ${RUNS.connectValid} valid definitions come back exactly as sent, and REST reads ` +
      `the same`,
    async () => {
      const clients = [false, true].map((useBinaryFormat) =>
        createClient(
          AgentDefinitionService,
          createConnectTransport({
            baseUrl: server().baseUrl,
            httpVersion: "1.1",
            useBinaryFormat,
            interceptors: [withAuthorization(server().authorization)],
          }),
        ),
      );
      await fc.assert(
        fc.asyncProperty(validDefinition(unique), fc.boolean(), async (def, binary) => {
          const request = create(UpsertAgentDefinitionRequestSchema, {
            agentCardAndTools: fromJson(AgentDefinitionSchema, def),
          });
          const created = await clients[binary ? 1 : 0]!.upsertAgentDefinition(request);
          expect(withoutReadOnly(toJson(AgentDefinitionSchema, created) as Record<string, any>)).toEqual(def);
          expect(withoutReadOnly(await getRest(created.id))).toEqual(def);
        }),
        { numRuns: RUNS.connectValid },
      );
    },
  );

  it(
    `REST: ${RUNS.restInvalid} definitions broken against the contract are each a 4xx in the spec's ` + `shape`,
    async () => {
      await fc.assert(
        fc.asyncProperty(brokenDefinition(unique), async ({ kind, value }) => {
          await expectRestRefusal(await postRest(JSON.stringify(value)), kind);
        }),
        { numRuns: RUNS.restInvalid },
      );
    },
  );

  it(
    `REST: ${RUNS.restText} bodies broken below JSON (syntax, duplicates, depth, encoding) are each a 4xx in the ` +
      `spec's shape`,
    async () => {
      await fc.assert(
        fc.asyncProperty(brokenText(unique), async ({ kind, bytes }) => {
          await expectRestRefusal(await postRest(bytes), kind);
        }),
        { numRuns: RUNS.restText },
      );
    },
  );

  it(
    `Connect JSON: ${RUNS.connectInvalid} broken definitions are each a 4xx with the ValidationError ` + `detail`,
    async () => {
      await fc.assert(
        fc.asyncProperty(brokenDefinition(unique), async ({ kind, value }) => {
          expectConnectRefusal(
            await postConnectJson(
              server().baseUrl,
              server().authorization,
              UPSERT_RPC,
              JSON.stringify({ agentCardAndTools: value }),
            ),
            kind,
          );
        }),
        { numRuns: RUNS.connectInvalid },
      );
    },
  );

  it(
    `Connect JSON: ${RUNS.connectText} bodies broken below JSON are each a 4xx with the ValidationError ` + `detail`,
    async () => {
      const prefix = new TextEncoder().encode('{"agentCardAndTools":');
      await fc.assert(
        fc.asyncProperty(brokenText(unique), async ({ kind, bytes }) => {
          const body = new Uint8Array([...prefix, ...bytes, 0x7d]);
          expectConnectRefusal(await postConnectJson(server().baseUrl, server().authorization, UPSERT_RPC, body), kind);
        }),
        { numRuns: RUNS.connectText },
      );
    },
  );

  it(
    `Connect binary: ${RUNS.binaryGarbage} random messages are each a 4xx with the ValidationError detail, never ` +
      `INTERNAL`,
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
          const res = await fetch(`${server().baseUrl}/${UPSERT_RPC}`, {
            method: "POST",
            headers: { ...headers(), "content-type": "application/proto", "connect-protocol-version": "1" },
            body: bytes,
          });
          const body = await res.json();
          const context = `${Buffer.from(bytes).toString("hex")}: ${res.status} ${JSON.stringify(body)}`;
          expect(res.status >= 400 && res.status < 500, context).toBe(true);
          expect(
            body.details?.map((d: any) => d.type),
            context,
          ).toContain("asor.v1.ValidationError");
        }),
        { numRuns: RUNS.binaryGarbage },
      );
    },
  );
});
