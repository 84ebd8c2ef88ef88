/**
 * Issue 12, item 1: one broken body must not stall everyone. However many
 * problems a body holds, its error lists at most 100 (the last one saying how
 * many more were left out), the answer stays small, and the work spent on it
 * is bounded: a 1 MB body of one key repeated 170,000 times used to answer
 * 16.8 MB over REST, 31.5 MB over Connect, and grow the process by 535 MB.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import type { ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { ValidationError } from "../../gen/asor/v1/error_pb.js";
import { spawnAuthorizedServer } from "../support/authorized-process.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";
/** The default MAX_BODY_BYTES. */
const ONE_MB = 1024 * 1024;
/** Every error answer must stay under this. */
const SMALL = 64 * 1024;
/** The most items `errors` lists. */
const MAX_ITEMS = 100;

/** A JSON object of `"a":0` repeated to fill `bytes` (less `reserve` for a wrapper). */
function duplicateKeys(bytes: number, reserve = 0): { text: string; keys: number } {
  const keys = Math.floor((bytes - reserve - 2) / 6);
  return { text: `{${Array.from({ length: keys }, () => '"a":0').join(",")}}`, keys };
}

/** The VmRSS and VmHWM (peak) lines of a process, in KiB. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
  return { rss: kib("VmRSS"), peak: kib("VmHWM") };
}

/** Checks an error list is capped: at most 100 items, the last a MORE_ISSUES item counting `leftOut` (when given). */
function expectCapped(errors: readonly { code: string; error: string }[], leftOut?: number): void {
  expect(errors.length).toBeLessThanOrEqual(MAX_ITEMS);
  const last = errors.at(-1);
  expect(last?.code).toBe("MORE_ISSUES");
  if (leftOut !== undefined) expect(last?.error).toContain(`${leftOut} more problems were left out`);
}

forEachDatabase((db) => {
  describe("a 1 MB body of 170,000 duplicate keys, against a service process", () => {
    it("is answered under 64 KiB over REST and Connect, the process grows by less than 50 MiB, and /healthz keeps " +
      "answering", async () => {
      const database = await db.create();
      const service = await spawnAuthorizedServer(database);
      try {
        const pid = service.child.pid as number;
        const rest = duplicateKeys(ONE_MB);
        expect(rest.keys).toBeGreaterThan(170_000);
        const connect = duplicateKeys(ONE_MB, '{"agentCardAndTools":}'.length);
        const postRest = (text: string) =>
          fetch(`${service.baseUrl}${PATH}`, {
            method: "POST",
            headers: { authorization: service.authorization, "content-type": "application/json" },
            body: text,
          });
        const postConnect = (text: string) =>
          postConnectJson(service.baseUrl, service.authorization, UPSERT_RPC, `{"agentCardAndTools":${text}}`);

        // Warm-up: the same paths with a small broken body, so the measurement sees the broken body, not the
        // code loading.
        for (let i = 0; i < 3; i++) {
          expect((await postRest('{"a":0,"a":0}')).status).toBe(400);
          expect((await postConnect('{"a":0,"a":0}')).status).toBe(400);
          expect((await fetch(`${service.baseUrl}/healthz`)).status).toBe(200);
        }
        // Resets the process's peak RSS (VmHWM) to its current RSS (Linux clear_refs).
        writeFileSync(`/proc/${pid}/clear_refs`, "5");
        const before = memoryOf(pid).rss;

        let done = false;
        const probes: number[] = [];
        const probing = (async () => {
          while (!done) probes.push((await fetch(`${service.baseUrl}/healthz`)).status);
        })();
        const [restAnswer, connectAnswer] = await Promise.all([
          (async () => {
            const res = await postRest(rest.text);
            return { status: res.status, text: await res.text() };
          })(),
          (async () => {
            const res = await fetch(`${service.baseUrl}/${UPSERT_RPC}`, {
              method: "POST",
              headers: {
                "content-type": "application/json",
                "connect-protocol-version": "1",
                authorization: service.authorization,
              },
              body: `{"agentCardAndTools":${connect.text}}`,
            });
            return { status: res.status, text: await res.text() };
          })(),
        ]);
        done = true;
        await probing;
        const grown = memoryOf(pid).peak - before;

        expect(restAnswer.status).toBe(400);
        expect(Buffer.byteLength(restAnswer.text)).toBeLessThan(SMALL);
        const restBody = JSON.parse(restAnswer.text);
        expect(restBody.errors[0]).toMatchObject({ code: "DUPLICATE_KEY", path: "a", field: "a" });
        expectCapped(restBody.errors, rest.keys - 1 - (MAX_ITEMS - 1));

        expect(connectAnswer.status).toBe(400);
        expect(Buffer.byteLength(connectAnswer.text)).toBeLessThan(SMALL);
        expect(JSON.parse(connectAnswer.text).code).toBe("invalid_argument");

        expect(probes.length).toBeGreaterThan(0);
        expect(probes.every((s) => s === 200)).toBe(true);
        expect(grown, `the process grew by ${Math.round(grown / 1024)} MiB`).toBeLessThan(50 * 1024);
        expect(service.alive()).toBe(true);
      } finally {
        await service.stop();
        await database.cleanup();
      }
    }, 120_000);
  });

  describe("many problems in one body", () => {
    const server = useServer(db);
    const post = (body: string, contentType = "application/json") =>
      fetch(`${server().baseUrl}${PATH}`, {
        method: "POST",
        headers: { authorization: server().authorization, "content-type": contentType },
        body,
      });

    it(
      "500 unknown members: REST lists 99 of them and says 401 more were left out; the message counts all " + "500",
      async () => {
        const def: Record<string, unknown> = minimalDefinition({ name: "Unknown Members" });
        for (let i = 0; i < 500; i++) def[`unknown${i}`] = i;
        const res = await post(JSON.stringify(def));
        const body = await res.json();
        expect(res.status).toBe(400);
        expect(body.error).toBe("The request has 500 problems.");
        expect(body.errors.slice(0, 99).every((e: any) => e.code === "UNKNOWN_FIELD")).toBe(true);
        expect(body.errors[0]).toMatchObject({ field: "unknown0", path: "unknown0" });
        expectCapped(body.errors, 401);
      },
    );

    it("500 unknown members over Connect: the ValidationError detail is capped the same way", async () => {
      const def: Record<string, unknown> = minimalDefinition({ name: "Unknown Members Connect" });
      for (let i = 0; i < 500; i++) def[`unknown${i}`] = i;
      const answer = await postConnectJson(
        server().baseUrl,
        server().authorization,
        UPSERT_RPC,
        JSON.stringify({ agentCardAndTools: def }),
      );
      expect(answer.status).toBe(400);
      expect(answer.validation?.errors?.[0]).toMatchObject({ code: "UNKNOWN_FIELD", path: "unknown0" });
      expectCapped(answer.validation?.errors ?? [], 401);
    });

    it("15,000 unknown multipart parts get a small answer listing at most 100 items", async () => {
      // Written by hand with a short boundary, so 15,000 parts fit in 1 MB.
      const part = (name: string, value: string) =>
        `--b\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
      const parts = [part("agentCardAndTools", JSON.stringify(minimalDefinition({ name: "Many Parts" })))];
      for (let i = 0; i < 15_000; i++) parts.push(part(`part${i}`, "x"));
      const multipart = `${parts.join("")}--b--\r\n`;
      expect(multipart.length).toBeLessThan(ONE_MB);
      const res = await post(multipart, "multipart/form-data; boundary=b");
      const text = await res.text();
      expect(res.status).toBe(400);
      expect(Buffer.byteLength(text)).toBeLessThan(SMALL);
      const body = JSON.parse(text);
      expect(body.errors[0]).toMatchObject({ code: "UNKNOWN_FIELD", field: "part0" });
      expectCapped(body.errors, 15_000 - 99);
    });

    it(
      "300,000 empty skills (within 1 MB) are answered small, listing the list's excess and the first broken " +
        "items",
      async () => {
        const text = JSON.stringify(minimalDefinition({ name: "Empty Skills" })).replace(
          /"skills":\[[^\]]*\]/,
          `"skills":[${Array(300_000).fill("{}").join(",")}]`,
        );
        expect(text.length).toBeLessThan(ONE_MB);
        const res = await post(text);
        const answer = await res.text();
        expect(res.status).toBe(400);
        expect(Buffer.byteLength(answer)).toBeLessThan(SMALL);
        const body = JSON.parse(answer);
        expect(body.errors).toEqual(
          expect.arrayContaining([expect.objectContaining({ code: "TOO_MANY", path: "skills" })]),
        );
        expect(body.errors).toEqual(
          expect.arrayContaining([expect.objectContaining({ code: "REQUIRED", path: "skills[0].id" })]),
        );
        expectCapped(body.errors);
      },
    );

    it("a key of 900,000 characters named in an issue is cut short, so the answer stays small", async () => {
      const res = await post(JSON.stringify({ ...minimalDefinition({ name: "Long Key" }), ["k".repeat(900_000)]: 1 }));
      const text = await res.text();
      expect(res.status).toBe(400);
      expect(Buffer.byteLength(text)).toBeLessThan(SMALL);
      expect(JSON.parse(text).errors[0].code).toBe("UNKNOWN_FIELD");
    });

    it(
      "issues quoting long multibyte values are cut, so the Connect answer (detail twice: binary and JSON) stays " +
        "under 64 KiB",
      async () => {
        const id = "\u4e2d".repeat(250);
        const def = minimalDefinition({
          name: "Wide Duplicates",
          skills: Array.from({ length: 100 }, () => ({ id, name: "n", description: "d" })),
        });
        const res = await fetch(`${server().baseUrl}/${UPSERT_RPC}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "connect-protocol-version": "1",
            authorization: server().authorization,
          },
          body: JSON.stringify({ agentCardAndTools: def }),
        });
        const text = await res.text();
        expect(res.status).toBe(400);
        expect(Buffer.byteLength(text)).toBeLessThan(SMALL);
        expect(JSON.parse(text).details[0].debug.errors[0]).toMatchObject({
          code: "DUPLICATE_SKILL_ID",
          path: "skills[1].id",
        });
      },
    );

    it(
      "gRPC (@grpc/grpc-js): a binary message with 50,000 unknown fields gets INVALID_ARGUMENT with at most 100 " +
        "items",
      async () => {
        const agentCardAndTools = create(AgentDefinitionSchema, {
          ...minimalDefinition({ name: "Unknown Binary" }),
          provider: { id: "Provider=Acme" },
        } as never);
        agentCardAndTools.$unknown = Array.from({ length: 50_000 }, (_, i) => ({
          no: 1000 + i,
          wireType: 0,
          data: new Uint8Array([1]),
        }));
        const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
        try {
          const err = (await client
            .call("upsertAgentDefinition", create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools }))
            .catch((e: unknown) => e)) as ServiceError;
          expect(err.code).toBe(3); // INVALID_ARGUMENT
          const detail = grpcErrorDetails(err).find((d) => d.$typeName === "asor.v1.ValidationError") as
            | ValidationError
            | undefined;
          expect(detail?.errors[0]).toMatchObject({ code: "UNKNOWN_FIELD", path: "#1000" });
          expect(detail?.errors.length).toBeLessThanOrEqual(MAX_ITEMS);
          expect(detail?.errors.at(-1)?.code).toBe("MORE_ISSUES");
          expect(detail?.errors.at(-1)?.error).toContain(`${50_000 - 99} more problems were left out`);
        } finally {
          client.close();
        }
      },
    );
  });
});
