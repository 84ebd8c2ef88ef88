import type { DescField, DescFile, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { DescriptorProtoSchema, FileDescriptorProtoSchema, ServiceDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

type Commented = DescMessage | DescField | DescService | DescMethod;

/** Where `desc` is in its file, as a SourceCodeInfo location path (descriptor.proto field numbers and indexes). */
function locationOf(desc: Commented): { file: DescFile; path: number[] } {
  switch (desc.kind) {
    case "message": {
      if (desc.parent === undefined)
        return {
          file: desc.file,
          path: [FileDescriptorProtoSchema.field.messageType.number, desc.file.proto.messageType.indexOf(desc.proto)],
        };
      const parent = locationOf(desc.parent);
      return {
        file: parent.file,
        path: [
          ...parent.path,
          DescriptorProtoSchema.field.nestedType.number,
          desc.parent.proto.nestedType.indexOf(desc.proto),
        ],
      };
    }
    case "field": {
      const parent = locationOf(desc.parent);
      return {
        file: parent.file,
        path: [...parent.path, DescriptorProtoSchema.field.field.number, desc.parent.proto.field.indexOf(desc.proto)],
      };
    }
    case "service":
      return {
        file: desc.file,
        path: [FileDescriptorProtoSchema.field.service.number, desc.file.proto.service.indexOf(desc.proto)],
      };
    case "rpc": {
      const parent = locationOf(desc.parent);
      return {
        file: parent.file,
        path: [
          ...parent.path,
          ServiceDescriptorProtoSchema.field.method.number,
          desc.parent.proto.method.indexOf(desc.proto),
        ],
      };
    }
  }
}

/**
 * The leading comment of a message, field, service or RPC in the .proto
 * source, as text: the lines of a paragraph joined with spaces, paragraphs
 * apart by a blank line. "" when the descriptors carry no source info (the
 * descriptors embedded in gen/*_pb.ts do not; a `buf build` image does).
 */
export function leadingComment(desc: Commented): string {
  const { file, path } = locationOf(desc);
  const location = file.proto.sourceCodeInfo?.location.find(
    (l) => l.path.length === path.length && l.path.every((n, i) => n === path[i]),
  );
  const text = (location?.leadingComments ?? "").trim();
  if (text === "") return "";
  return text
    .split(/\n\s*\n/)
    .map((paragraph) => paragraph.replace(/\s*\n\s*/g, " "))
    .join("\n\n");
}
