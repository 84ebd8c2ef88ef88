/**
 * The RPC clients of the load generator, one per surface, each as "call this
 * operation with this request": @grpc/grpc-js over HTTP/2 (built from the
 * generated descriptors with test/support/grpc-js-client.ts), and a
 * Connect client (JSON over HTTP/1.1 keep-alive connections, as a web client
 * speaks it).
 */
import { Agent } from "node:http";
import type { Message } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { AgentDefinitionService } from "../gen/asor/v1/agent_definition_service_pb.js";
import { grpcJsServiceDefinition } from "../test/support/grpc-js-client.js";

/** Calls one unary method of AgentDefinitionService; rejects on any RPC error. */
export type UnaryCall = (
  method: "getAgentDefinition" | "getAgentCard" | "listAgentDefinitions" | "upsertAgentDefinition",
  request: Message,
) => Promise<unknown>;

export interface RpcClient {
  readonly call: UnaryCall;
  close(): void;
}

/** One grpc-js channel (one HTTP/2 connection) that every concurrent call shares, as gRPC clients do. */
export function createGrpcClient(baseUrl: string, authorization: string): RpcClient {
  const definition = grpcJsServiceDefinition(AgentDefinitionService);
  const Client = grpc.makeGenericClientConstructor(definition, AgentDefinitionService.name);
  const client = new Client(new URL(baseUrl).host, grpc.credentials.createInsecure()) as unknown as grpc.Client &
    Record<
      string,
      (req: Message, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: Message) => void) => void
    >;
  const metadata = new grpc.Metadata();
  metadata.set("authorization", authorization);
  return {
    call: (method, request) =>
      new Promise((resolve, reject) => {
        client[method]!.call(client, request, metadata, (err, res) => (err ? reject(err) : resolve(res)));
      }),
    close: () => client.close(),
  };
}

/** A Connect client speaking JSON over up to `connections` HTTP/1.1 keep-alive connections. */
export function createConnectClient(baseUrl: string, authorization: string, connections: number): RpcClient {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const transport = createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: false,
    nodeOptions: { agent },
  });
  const client = createClient(AgentDefinitionService, transport);
  const headers = { authorization };
  const methods: Record<Parameters<UnaryCall>[0], (request: Message) => Promise<unknown>> = {
    getAgentDefinition: (request) =>
      client.getAgentDefinition(request as Parameters<typeof client.getAgentDefinition>[0], { headers }),
    getAgentCard: (request) => client.getAgentCard(request as Parameters<typeof client.getAgentCard>[0], { headers }),
    listAgentDefinitions: (request) =>
      client.listAgentDefinitions(request as Parameters<typeof client.listAgentDefinitions>[0], { headers }),
    upsertAgentDefinition: (request) =>
      client.upsertAgentDefinition(request as Parameters<typeof client.upsertAgentDefinition>[0], { headers }),
  };
  return {
    call: (method, request) => methods[method](request),
    close: () => agent.destroy(),
  };
}
