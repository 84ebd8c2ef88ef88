import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { create, createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
} from "../../gen/grpc/health/v1/health_pb.js";
import {
  ServerReflection,
  type ServerReflectionRequestSchema,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition, withoutEmptyLists } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { startServer, type TestServer, useServer } from "../support/server.js";
import { createTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

const run = promisify(execFile);
const [sqlite, mariadb] = testDatabases();

/** `buf curl` from node_modules (scripts/buf.mjs) with no `--schema`: the schema comes by reflection. */
async function bufCurl(...args: string[]): Promise<string> {
  const { stdout } = await run("node", ["scripts/buf.mjs", "curl", ...args]);
  return stdout;
}
const GRPC = ["--protocol", "grpc", "--http2-prior-knowledge"];
const CONNECT = ["--protocol", "connect"];

/** Every RPC of both registry services, as `buf curl --list-methods` prints them. */
const registryMethods = [AgentDefinitionService, TenantAdminService].flatMap((s) =>
  s.methods.map((m) => `${s.typeName}/${m.name}`),
);

/** One reflection request per element, on one stream; the answers in order. */
async function reflect(
  server: TestServer,
  requests: MessageInitShape<typeof ServerReflectionRequestSchema>[],
): Promise<ServerReflectionResponse[]> {
  const client = createClient(ServerReflection, createGrpcTransport({ baseUrl: server.baseUrl }));
  async function* send() {
    for (const request of requests) yield request;
  }
  const answers: ServerReflectionResponse[] = [];
  for await (const answer of client.serverReflectionInfo(send())) answers.push(answer);
  return answers;
}

function filesOf(answer: ServerReflectionResponse): string[] {
  if (answer.messageResponse.case !== "fileDescriptorResponse")
    throw new Error(`expected files, got ${answer.messageResponse.case}`);
  return answer.messageResponse.value.fileDescriptorProto.map(
    (bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name,
  );
}

describe("gRPC tools against a running server", () => {
  const server = useServer(sqlite!);
  let created: Record<string, any>;

  beforeAll(async () => {
    const response = await fetch(`${server().baseUrl}/asor/v1/agentDefinition`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: "Reflected Agent" })),
    });
    expect(response.status).toBe(201);
    created = await response.json();
  });

  it.each([
    ["grpc-v1", GRPC],
    ["grpc-v1alpha", GRPC],
    ["grpc-v1", CONNECT],
  ])("buf curl --list-methods by %s reflection (%j) lists every registry RPC", async (protocol, transport) => {
    const out = await bufCurl(...transport, "--reflect-protocol", protocol, "--list-methods", server().baseUrl);
    const listed = out.trim().split("\n");
    expect(listed).toEqual(expect.arrayContaining(registryMethods));
    expect(listed).toEqual(expect.arrayContaining(["grpc.health.v1.Health/Check", "grpc.health.v1.Health/Watch"]));
  });

  it.each([
    ["gRPC", GRPC],
    ["Connect", CONNECT],
  ])(
    "buf curl without --schema gets and lists definitions over %s, as with the committed schema",
    async (_name, transport) => {
      const auth = ["-H", `Authorization: ${server().authorization}`];
      const url = `${server().baseUrl}/asor.v1.AgentDefinitionService`;
      const got = JSON.parse(
        await bufCurl(...transport, ...auth, "-d", JSON.stringify({ id: created.id }), `${url}/GetAgentDefinition`),
      );
      // Protobuf JSON leaves out the empty lists the REST answer shows.
      expect(got).toEqual(withoutEmptyLists(created));
      const listArgs = [...transport, ...auth, "-d", JSON.stringify({ limit: 100 }), `${url}/ListAgentDefinitions`];
      const list = JSON.parse(await bufCurl(...listArgs));
      expect(list.data.map((d: { id: string }) => d.id)).toContain(created.id);
      // Reflection gives the same schema as gen/asor.binpb: same JSON names, same answer.
      expect(list).toEqual(JSON.parse(await bufCurl("--schema", "gen/asor.binpb", ...listArgs)));
    },
  );

  it("keeps the registry RPCs behind the bearer token while reflection needs none", async () => {
    const failed = await bufCurl(
      ...GRPC,
      "-d",
      "{}",
      `${server().baseUrl}/asor.v1.AgentDefinitionService/ListAgentDefinitions`,
    ).catch((e: { stderr: string }) => e);
    expect(JSON.parse((failed as { stderr: string }).stderr).code).toBe("unauthenticated");
  });

  it("answers each reflection request on one stream, sending each imported file once", async () => {
    const answers = await reflect(server(), [
      {
        host: "registry",
        messageRequest: { case: "fileContainingSymbol", value: "asor.v1.AgentDefinitionService.GetAgentDefinition" },
      },
      { messageRequest: { case: "fileContainingSymbol", value: "asor.v1.AgentDefinition" } },
      { messageRequest: { case: "fileByFilename", value: "asor/v1/error.proto" } },
      {
        messageRequest: {
          case: "fileContainingExtension",
          value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 72295728 },
        },
      },
      { messageRequest: { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" } },
      { messageRequest: { case: "fileContainingSymbol", value: "asor.v1.NoSuchThing" } },
      { messageRequest: { case: "fileByFilename", value: "no/such.proto" } },
    ]);
    expect(answers).toHaveLength(7);
    expect(answers[0]!.validHost).toBe("registry");
    expect(answers[0]!.originalRequest?.messageRequest).toEqual({
      case: "fileContainingSymbol",
      value: "asor.v1.AgentDefinitionService.GetAgentDefinition",
    });
    const first = filesOf(answers[0]!);
    expect(first[0]).toBe("asor/v1/agent_definition_service.proto");
    expect(first).toEqual(
      expect.arrayContaining([
        "asor/v1/agent_definition.proto",
        "buf/validate/validate.proto",
        "google/api/annotations.proto",
        "google/protobuf/descriptor.proto",
      ]),
    );
    expect(new Set(first).size).toBe(first.length);
    // Already sent on this stream: the file alone, without its imports again.
    expect(filesOf(answers[1]!)).toEqual(["asor/v1/agent_definition.proto"]);
    expect(filesOf(answers[2]!)).toEqual(["asor/v1/error.proto"]);
    expect(filesOf(answers[3]!)).toEqual(["google/api/annotations.proto"]);
    expect(answers[4]!.messageResponse).toMatchObject({
      case: "allExtensionNumbersResponse",
      value: { baseTypeName: "google.protobuf.MethodOptions" },
    });
    expect(answers[4]!.messageResponse.value).toHaveProperty("extensionNumber", expect.arrayContaining([72295728]));
    for (const missing of answers.slice(5))
      expect(missing.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: Code.NotFound } });

    // What one stream sent is a complete schema: it compiles, with every registry RPC in it.
    const sent = [answers[0]!, answers[2]!].flatMap((a) =>
      a.messageResponse.case === "fileDescriptorResponse"
        ? a.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b))
        : [],
    );
    const byName = new Map(sent.map((file) => [file.name, file]));
    const compile = (name: string) => createFileRegistry(byName.get(name)!, (dependency) => byName.get(dependency));
    const registry = createFileRegistry(
      compile("asor/v1/agent_definition_service.proto"),
      compile("asor/v1/error.proto"),
    );
    expect(registry.getService("asor.v1.AgentDefinitionService")?.methods.map((m) => m.name)).toEqual(
      AgentDefinitionService.methods.map((m) => m.name),
    );
    expect(registry.getMessage("asor.v1.ValidationError")).toBeDefined();
  });

  it("answers v1alpha reflection as v1", async () => {
    const client = createClient(v1alpha.ServerReflection, createGrpcTransport({ baseUrl: server().baseUrl }));
    async function* send() {
      yield { messageRequest: { case: "listServices" as const, value: "" } };
    }
    const answers = [];
    for await (const answer of client.serverReflectionInfo(send())) answers.push(answer);
    expect(answers[0]?.$typeName).toBe("grpc.reflection.v1alpha.ServerReflectionResponse");
    const names =
      answers[0]?.messageResponse.case === "listServicesResponse"
        ? answers[0].messageResponse.value.service.map((s) => s.name)
        : [];
    expect(names).toEqual(
      expect.arrayContaining([AgentDefinitionService.typeName, TenantAdminService.typeName, Health.typeName]),
    );
  });

  it("says SERVING for the server and each registry service, and NOT_FOUND for an unknown service", async () => {
    const grpcJs = createGrpcJsClient(Health, `127.0.0.1:${server().port}`);
    try {
      for (const service of ["", AgentDefinitionService.typeName, TenantAdminService.typeName]) {
        const answer = await grpcJs.call(
          "check",
          create(HealthCheckRequestSchema, { service }),
          HealthCheckResponseSchema,
        );
        expect(answer.status, service).toBe(Status.SERVING);
      }
      const unknown = await grpcJs
        .call("check", create(HealthCheckRequestSchema, { service: "no.Such" }))
        .catch((e: ServiceError) => e);
      expect((unknown as ServiceError).code).toBe(grpcStatus.NOT_FOUND);
    } finally {
      grpcJs.close();
    }
  });

  it("keeps a Watch of an unknown service open after SERVICE_UNKNOWN", async () => {
    const watching = new AbortController();
    const watch = createClient(Health, createGrpcTransport({ baseUrl: server().baseUrl }))
      .watch({ service: "no.Such" }, { signal: watching.signal })
      [Symbol.asyncIterator]();
    try {
      expect((await watch.next()).value?.status).toBe(Status.SERVICE_UNKNOWN);
      const more = watch.next().then(() => "answered");
      expect(await Promise.race([more, new Promise((resolve) => setTimeout(() => resolve("still open"), 1_500))])).toBe(
        "still open",
      );
      more.catch(() => undefined);
    } finally {
      watching.abort();
    }
  });

  it("answers the HTTP probes without a token, and only to GET and HEAD", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      const get = await fetch(`${server().baseUrl}${path}`);
      expect(get.status, path).toBe(200);
      expect(get.headers.get("cache-control")).toBe("no-store");
      expect(await get.json()).toEqual({ status: "ok" });
      expect((await fetch(`${server().baseUrl}${path}`, { method: "HEAD" })).status).toBe(200);
      const post = await fetch(`${server().baseUrl}${path}`, { method: "POST" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD");
    }
  });
});

describe.skipIf(mariadb!.skip)("health while the database comes and goes (MariaDB behind a TCP proxy)", () => {
  let database: FreshDatabase;
  let proxy: TcpProxy;
  let server: TestServer & { stop(): Promise<void> };

  beforeAll(async () => {
    database = await mariadb!.create();
    const url = new URL(database.databaseUrl!);
    proxy = await createTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
    server = await startServer({ ...database, databaseUrl: proxy.via(database.databaseUrl!) });
  });

  afterAll(async () => {
    await server?.stop();
    await proxy?.close();
    await database?.cleanup();
  });

  it("goes NOT_SERVING and 503 while the database is away, and back when it returns; /healthz stays 200", async () => {
    const grpcJs = createGrpcJsClient(Health, `127.0.0.1:${server.port}`);
    const check = async (): Promise<Status> =>
      (await grpcJs.call("check", create(HealthCheckRequestSchema, { service: "" }), HealthCheckResponseSchema)).status;
    const probe = async (path: string): Promise<{ status: number; body: unknown }> => {
      const response = await fetch(`${server.baseUrl}${path}`);
      return { status: response.status, body: await response.json() };
    };
    const watching = new AbortController();
    const watch = createClient(Health, createGrpcTransport({ baseUrl: server.baseUrl }))
      .watch({ service: AgentDefinitionService.typeName }, { signal: watching.signal })
      [Symbol.asyncIterator]();
    const next = async (): Promise<Status> => {
      const { value, done } = await watch.next();
      if (done) throw new Error("the Watch stream ended");
      return value.status;
    };
    try {
      expect(await check()).toBe(Status.SERVING);
      expect(await next()).toBe(Status.SERVING);
      expect(await probe("/readyz")).toEqual({ status: 200, body: { status: "ok" } });

      await proxy.cut();
      expect(await check()).toBe(Status.NOT_SERVING);
      expect(await probe("/readyz")).toEqual({ status: 503, body: { error: expect.any(String), code: "UNAVAILABLE" } });
      expect(await probe("/healthz")).toEqual({ status: 200, body: { status: "ok" } });
      expect(await next()).toBe(Status.NOT_SERVING);

      await proxy.restore();
      await expect.poll(check, { timeout: 10_000 }).toBe(Status.SERVING);
      expect((await probe("/readyz")).status).toBe(200);
      expect(await next()).toBe(Status.SERVING);
    } finally {
      watching.abort();
      grpcJs.close();
    }
  });
});
