import { create, toBinary } from "@bufbuild/protobuf";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { testDatabases } from "../support/databases.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { rawGrpcAnswer } from "../support/raw-grpc.js";
import { useServerUnder } from "../support/runtimes.js";
import { RUNTIMES } from "../support/server-process.js";

/**
 * The text of a gRPC error reads the same in every client. `grpc-message` is percent-encoded as gRPC's
 * spec asks and no further (src/surfaces/grpc/status.ts): encoded as encodeURIComponent encodes it,
 * @grpc/grpc-js (which decodes with decodeURI) read "%3B", "%2C", "%3A" for `;` `,` `:` in the registry's
 * messages. An id that is not found is echoed in the message, so it carries every character tried.
 */
const ID = "nope; really, a: b/c? #1 & 2=3 + $4 @ 50% café";
const MESSAGE = `Agent definition "${ID}" was not found.`;
const RPC = `${AgentDefinitionService.typeName}/GetAgentDefinition`;
const sqlite = testDatabases().find((db) => db.name === "sqlite")!;

for (const runtime of RUNTIMES) {
  describe(`gRPC error messages under ${runtime}`, () => {
    const server = useServerUnder(runtime, sqlite);
    let authorization: string;
    let grpcJs: ReturnType<typeof createGrpcJsClient>;
    beforeAll(async () => {
      authorization = await server().bearer();
      grpcJs = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, authorization);
    });
    afterAll(() => grpcJs?.close());

    it("sends grpc-message encoded as the spec asks: printable ASCII as it is, % and UTF-8 bytes as %XX", async () => {
      const request = toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { id: ID }));
      const answer = await rawGrpcAnswer(server().baseUrl, authorization, RPC, request);
      expect(answer.get("grpc-status")).toBe("5");
      expect(answer.get("grpc-message")).toBe(
        'Agent definition "nope; really, a: b/c? #1 & 2=3 + $4 @ 50%25 caf%C3%A9" was not found.',
      );
    });

    it("reads the same through @grpc/grpc-js and Connect's gRPC client", async () => {
      const fromGrpcJs = (await grpcJs
        .call("getAgentDefinition", create(GetAgentDefinitionRequestSchema, { id: ID }))
        .then(
          () => undefined,
          (err: unknown) => err,
        )) as ServiceError | undefined;
      expect(fromGrpcJs?.details).toBe(MESSAGE);

      const connect = createClient(AgentDefinitionService, createGrpcTransport({ baseUrl: server().baseUrl }));
      const fromConnect = await connect.getAgentDefinition({ id: ID }, { headers: { authorization } }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(fromConnect).toBeInstanceOf(ConnectError);
      expect((fromConnect as ConnectError).rawMessage).toBe(MESSAGE);
    });
  });
}
