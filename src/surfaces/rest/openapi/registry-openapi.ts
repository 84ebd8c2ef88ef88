import { createFileRegistry, type DescService, fromBinary, getOption, type JsonObject } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { ErrorSchema, ValidationErrorSchema } from "../../../../gen/asor/v1/error_pb.js";
import { http } from "../../../../gen/google/api/annotations_pb.js";
import { registryPolicy } from "../../../operations/registry-operations.js";
import { createOpenApiDocument } from "./openapi-document.js";

/**
 * The registry's OpenAPI document, as `npm run generate` commits it in
 * gen/openapi.json, from a `buf build` image of proto/asor (gen/asor.binpb):
 * an image keeps the proto comments, which become the descriptions. Its
 * services are those with `google.api.http` rules; the security domains are
 * the policy's, with `adminDomain` for the tenant admin RPCs (the committed
 * document has the default, `AUTH_ADMIN_DOMAIN` unset).
 */
export function registryOpenApiDocument(image: Uint8Array, adminDomain: string): JsonObject {
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, image));
  const services: DescService[] = [];
  for (const file of registry.files) {
    for (const service of file.services) {
      if (service.methods.some((m) => getOption(m, http).pattern.case !== undefined)) services.push(service);
    }
  }
  const message = (typeName: string) => {
    const desc = registry.getMessage(typeName);
    if (desc === undefined) throw new Error(`the descriptor image has no ${typeName}`);
    return desc;
  };
  return createOpenApiDocument({
    services,
    policy: registryPolicy(adminDomain),
    errorBodies: { error: message(ErrorSchema.typeName), validation: message(ValidationErrorSchema.typeName) },
  });
}
