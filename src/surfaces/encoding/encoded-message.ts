import { create, type DescMessage, type Message, type MessageShape } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";

/**
 * A message that serializes to `bytes`, a stored binary encoding of `desc`,
 * without decoding it: each top-level field becomes one of the message's
 * unknown fields, which protobuf-es writes back verbatim (`$unknown`). A
 * binary answer of a stored definition is thus the stored bytes, framed.
 * Only for answers to be serialized as binary: JSON ignores unknown fields.
 */
export function preEncoded<Desc extends DescMessage>(desc: Desc, bytes: Uint8Array): MessageShape<Desc> {
  const message = create(desc);
  // Split when first read: a message serialized as JSON, or not at all, never reads them.
  let fields: MessageShape<Desc>["$unknown"];
  Object.defineProperty(message, "$unknown", {
    enumerable: true,
    configurable: true,
    get: () => (fields ??= topLevelFields(bytes)),
    set: (value: MessageShape<Desc>["$unknown"]) => {
      fields = value;
    },
  });
  return message;
}

/** Each top-level field of `bytes` as an unknown field: its number, wire type and encoded data. */
function topLevelFields(bytes: Uint8Array): NonNullable<Message["$unknown"]> {
  const fields: NonNullable<Message["$unknown"]> = [];
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    fields.push({ no, wireType, data: reader.skip(wireType, no) });
  }
  return fields;
}
