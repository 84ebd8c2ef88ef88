import {
  createRegistry,
  type DescMessage,
  type DescService,
  fromBinary,
  type Message,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { AnySchema, anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { ErrorSchema, ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";

/**
 * An @grpc/grpc-js client for a protobuf-es service, built from the generated
 * descriptors (no proto-loader): each unary method as a promise.
 */
/** A grpc-js service definition for a protobuf-es service: protobuf-es encodes, grpc-js carries. */
export function grpcJsServiceDefinition(service: DescService): Record<string, grpc.MethodDefinition<Message, Message>> {
  const definition: Record<string, grpc.MethodDefinition<Message, Message>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: Message) => Buffer.from(toBinary(method.input, m as MessageShape<typeof method.input>)),
      requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: (m: Message) => Buffer.from(toBinary(method.output, m as MessageShape<typeof method.output>)),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
    };
  }
  return definition;
}

export function createGrpcJsClient(service: DescService, address: string, authorization?: string) {
  const definition = grpcJsServiceDefinition(service);
  const Client = grpc.makeGenericClientConstructor(definition, service.name);
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as Record<
    string,
    (req: Message, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: Message) => void) => void
  > &
    grpc.Client;
  return {
    /** Calls `method`, sending `authorization` (the client's, unless given). */
    call<O extends DescMessage>(
      method: string,
      request: Message,
      _output?: O,
      metadata = authorizationMetadata(authorization),
    ): Promise<MessageShape<O>> {
      return new Promise((resolve, reject) => {
        const fn = client[method];
        if (fn === undefined) throw new Error(`no method ${method}`);
        fn.call(client, request, metadata, (err, res) => (err ? reject(err) : resolve(res as MessageShape<O>)));
      });
    },
    close: () => client.close(),
  };
}

function authorizationMetadata(authorization: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (authorization !== undefined) metadata.set("authorization", authorization);
  return metadata;
}

const registry = createRegistry(ValidationErrorSchema, ErrorSchema);

/** The details of a gRPC error (`grpc-status-details-bin`, a google.rpc.Status), unpacked. */
export function grpcErrorDetails(err: grpc.ServiceError): Message[] {
  const [bin] = err.metadata.get("grpc-status-details-bin");
  if (!(bin instanceof Buffer)) return [];
  const details: Message[] = [];
  const reader = new BinaryReader(bin);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 3) {
      const any = fromBinary(AnySchema, reader.bytes());
      const unpacked = anyUnpack(any, registry);
      if (unpacked) details.push(unpacked);
    } else {
      reader.skip(wireType);
    }
  }
  return details;
}
