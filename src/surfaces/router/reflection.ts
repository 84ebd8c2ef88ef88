import {
  create,
  createRegistry,
  type DescFile,
  type DescService,
  fromBinary,
  type MessageInitShape,
  toBinary,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import {
  ServerReflection,
  type ServerReflectionRequest,
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
} from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** What the reflection service describes. */
export interface ReflectionOptions {
  /** The services the server serves; their files and every file they import are described. */
  readonly services: readonly DescService[];
  /** Further files to describe, e.g. the messages of error details, which no service imports. */
  readonly files?: readonly DescFile[];
}

type Answer = MessageInitShape<typeof ServerReflectionResponseSchema>;

/**
 * gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), so `buf curl`
 * and grpcurl can call the server without a copy of its schema. It answers
 * from the file descriptors that protobuf-es generated into gen/, the same
 * ones the handlers run on, so the schema it gives cannot drift from the
 * server. It lists the given services and itself.
 */
export function createReflectionRoutes({ services, files = [] }: ReflectionOptions): (router: ConnectRouter) => void {
  const reflection = [ServerReflection, v1alpha.ServerReflection];
  const byName = new Map<string, DescFile>();
  const addFile = (file: DescFile): void => {
    if (byName.has(file.proto.name)) return;
    byName.set(file.proto.name, file);
    for (const dependency of file.dependencies) addFile(dependency);
  };
  for (const service of [...services, ...reflection]) addFile(service.file);
  for (const file of files) addFile(file);
  const registry = createRegistry(...byName.values());
  const serviceNames = [...services, ...reflection].map((s) => s.typeName);
  const encoded = new Map<string, Uint8Array>();
  const bytesOf = (file: DescFile): Uint8Array => {
    let bytes = encoded.get(file.proto.name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      encoded.set(file.proto.name, bytes);
    }
    return bytes;
  };

  /** The file that defines `symbol`: a type, a service, or a method, field or enum value inside one. */
  const fileContaining = (symbol: string): DescFile | undefined => {
    const found = registry.get(symbol);
    if (found !== undefined) return found.file;
    const dot = symbol.lastIndexOf(".");
    const parent = dot < 0 ? undefined : registry.get(symbol.slice(0, dot));
    if (parent === undefined) return undefined;
    const member = symbol.slice(dot + 1);
    const members: readonly { name: string }[] =
      parent.kind === "service"
        ? parent.methods
        : parent.kind === "message"
          ? [...parent.fields, ...parent.oneofs]
          : parent.kind === "enum"
            ? parent.values
            : [];
    return members.some((m) => m.name === member) ? parent.file : undefined;
  };

  /**
   * The file and, as grpc-go does, every file it imports that this stream has
   * not been sent yet (a client keeps what it was sent).
   */
  const withImports = (file: DescFile, sent: Set<string>): Answer["messageResponse"] => {
    const out: Uint8Array[] = [bytesOf(file)];
    sent.add(file.proto.name);
    const pending = [...file.dependencies];
    for (let dependency = pending.shift(); dependency !== undefined; dependency = pending.shift()) {
      if (sent.has(dependency.proto.name)) continue;
      sent.add(dependency.proto.name);
      out.push(bytesOf(dependency));
      pending.push(...dependency.dependencies);
    }
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  };

  const notFound = (what: string): Answer["messageResponse"] => ({
    case: "errorResponse",
    value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
  });

  const answer = (request: ServerReflectionRequest, sent: Set<string>): Answer => {
    const { messageRequest: m } = request;
    let messageResponse: Answer["messageResponse"];
    if (m.case === "listServices") {
      messageResponse = { case: "listServicesResponse", value: { service: serviceNames.map((name) => ({ name })) } };
    } else if (m.case === "fileByFilename") {
      const file = byName.get(m.value);
      messageResponse = file === undefined ? notFound(`file "${m.value}"`) : withImports(file, sent);
    } else if (m.case === "fileContainingSymbol") {
      const file = fileContaining(m.value);
      messageResponse = file === undefined ? notFound(`symbol "${m.value}"`) : withImports(file, sent);
    } else if (m.case === "fileContainingExtension") {
      const { containingType, extensionNumber } = m.value;
      const extendee = registry.getMessage(containingType);
      const extension = extendee === undefined ? undefined : registry.getExtensionFor(extendee, extensionNumber);
      messageResponse =
        extension === undefined
          ? notFound(`extension ${extensionNumber} of "${containingType}"`)
          : withImports(extension.file, sent);
    } else if (m.case === "allExtensionNumbersOfType") {
      const extendee = registry.getMessage(m.value);
      const numbers = [...registry].flatMap((d) =>
        d.kind === "extension" && d.extendee.typeName === m.value ? [d.number] : [],
      );
      messageResponse =
        extendee === undefined
          ? notFound(`type "${m.value}"`)
          : { case: "allExtensionNumbersResponse", value: { baseTypeName: m.value, extensionNumber: numbers } };
    } else {
      messageResponse = {
        case: "errorResponse",
        value: { errorCode: Code.InvalidArgument, errorMessage: "the request names no message_request" },
      };
    }
    return { validHost: request.host, originalRequest: request, messageResponse };
  };

  return (router: ConnectRouter): void => {
    router.service(ServerReflection, {
      async *serverReflectionInfo(requests) {
        const sent = new Set<string>();
        for await (const request of requests) yield create(ServerReflectionResponseSchema, answer(request, sent));
      },
    });
    // v1alpha is v1 under another package name, field for field: its messages are re-read as v1.
    router.service(v1alpha.ServerReflection, {
      async *serverReflectionInfo(requests) {
        const sent = new Set<string>();
        for await (const request of requests) {
          const asV1 = fromBinary(
            ServerReflectionRequestSchema,
            toBinary(v1alpha.ServerReflectionRequestSchema, request),
          );
          const response = toBinary(
            ServerReflectionResponseSchema,
            create(ServerReflectionResponseSchema, answer(asV1, sent)),
          );
          yield fromBinary(v1alpha.ServerReflectionResponseSchema, response);
        }
      },
    });
  };
}
