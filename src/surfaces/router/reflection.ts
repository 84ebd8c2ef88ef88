import {
  create,
  createRegistry,
  type DescFile,
  type DescService,
  fromBinary,
  type MessageInitShape,
  type Registry,
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
 * The files reflection describes: the given services' and reflection's own, every file they import, and the
 * further files asked for; each encoded once, when first sent.
 */
class Descriptors {
  readonly byName = new Map<string, DescFile>();
  readonly registry: Registry;
  readonly serviceNames: readonly string[];
  readonly #encoded = new Map<string, Uint8Array>();

  constructor(services: readonly DescService[], files: readonly DescFile[]) {
    for (const service of services) this.#add(service.file);
    for (const file of files) this.#add(file);
    this.registry = createRegistry(...this.byName.values());
    this.serviceNames = services.map((s) => s.typeName);
  }

  #add(file: DescFile): void {
    if (this.byName.has(file.proto.name)) return;
    this.byName.set(file.proto.name, file);
    for (const dependency of file.dependencies) this.#add(dependency);
  }

  bytesOf(file: DescFile): Uint8Array {
    let bytes = this.#encoded.get(file.proto.name);
    if (bytes === undefined) {
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.#encoded.set(file.proto.name, bytes);
    }
    return bytes;
  }

  /** The file that defines `symbol`: a type, a service, or a method, field or enum value inside one. */
  fileContaining(symbol: string): DescFile | undefined {
    const found = this.registry.get(symbol);
    if (found !== undefined) return found.file;
    const dot = symbol.lastIndexOf(".");
    const parent = dot < 0 ? undefined : this.registry.get(symbol.slice(0, dot));
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
  }

  /**
   * The file and, as grpc-go does, every file it imports that this stream has
   * not been sent yet (a client keeps what it was sent).
   */
  withImports(file: DescFile, sent: Set<string>): Answer["messageResponse"] {
    const out: Uint8Array[] = [this.bytesOf(file)];
    sent.add(file.proto.name);
    const pending = [...file.dependencies];
    for (let dependency = pending.shift(); dependency !== undefined; dependency = pending.shift()) {
      if (sent.has(dependency.proto.name)) continue;
      sent.add(dependency.proto.name);
      out.push(this.bytesOf(dependency));
      pending.push(...dependency.dependencies);
    }
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }
}

function notFound(what: string): Answer["messageResponse"] {
  return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `${what} not found` } };
}

/** The answer to one reflection request, from `d`; `sent`: the files this stream was sent already. */
function answer(d: Descriptors, request: ServerReflectionRequest, sent: Set<string>): Answer {
  const { messageRequest: m } = request;
  let messageResponse: Answer["messageResponse"];
  if (m.case === "listServices") {
    messageResponse = { case: "listServicesResponse", value: { service: d.serviceNames.map((name) => ({ name })) } };
  } else if (m.case === "fileByFilename") {
    const file = d.byName.get(m.value);
    messageResponse = file === undefined ? notFound(`file "${m.value}"`) : d.withImports(file, sent);
  } else if (m.case === "fileContainingSymbol") {
    const file = d.fileContaining(m.value);
    messageResponse = file === undefined ? notFound(`symbol "${m.value}"`) : d.withImports(file, sent);
  } else if (m.case === "fileContainingExtension") {
    const { containingType, extensionNumber } = m.value;
    const extendee = d.registry.getMessage(containingType);
    const extension = extendee === undefined ? undefined : d.registry.getExtensionFor(extendee, extensionNumber);
    messageResponse =
      extension === undefined
        ? notFound(`extension ${extensionNumber} of "${containingType}"`)
        : d.withImports(extension.file, sent);
  } else if (m.case === "allExtensionNumbersOfType") {
    const extendee = d.registry.getMessage(m.value);
    const numbers = [...d.registry].flatMap((x) =>
      x.kind === "extension" && x.extendee.typeName === m.value ? [x.number] : [],
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
}

/**
 * gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), so `buf curl`
 * and grpcurl can call the server without a copy of its schema. It answers
 * from the file descriptors that protobuf-es generated into gen/, the same
 * ones the handlers run on, so the schema it gives cannot drift from the
 * server. It lists the given services and itself.
 */
export function createReflectionRoutes({ services, files = [] }: ReflectionOptions): (router: ConnectRouter) => void {
  const d = new Descriptors([...services, ServerReflection, v1alpha.ServerReflection], files);
  return (router: ConnectRouter): void => {
    router.service(ServerReflection, {
      async *serverReflectionInfo(requests) {
        const sent = new Set<string>();
        for await (const request of requests) yield create(ServerReflectionResponseSchema, answer(d, request, sent));
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
            create(ServerReflectionResponseSchema, answer(d, asV1, sent)),
          );
          yield fromBinary(v1alpha.ServerReflectionResponseSchema, response);
        }
      },
    });
  };
}
