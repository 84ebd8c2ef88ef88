/**
 * JSON answers of the RPCs (Connect, gRPC-Web and gRPC with a JSON codec)
 * written from the stored JSON bytes, as REST writes them, instead of from
 * messages decoded for the purpose: a page of large definitions decoded into
 * messages took a 128 MiB heap down in one call (issue 25), and decoding was
 * most of the CPU of a JSON read.
 *
 * Connect writes a JSON answer as `textEncoder.encode(toJsonString(message))`,
 * with the encoder of the service's `jsonOptions`. A handler that has the
 * answer's bytes already answers a stand-in: a message of the output type
 * with one string field set to a key (`~stored-json~<nonce>~<n>`, the nonce
 * random per process, so no text a client sends can name a key), directly
 * (`{"nextPageToken":"<key>"}`) or in a list's one item when the message has
 * no string of its own (`{"data":[{"id":"<key>"}]}`). The encoder recognises
 * exactly those texts and hands over the bytes the key names. Every other
 * message is encoded as a TextEncoder would.
 */
import { create, type DescField, type DescMessage, type Message, ScalarType } from "@bufbuild/protobuf";

export interface StoredJson {
  /** `jsonOptions.textEncoder` of the services whose handlers answer stand-ins. */
  readonly textEncoder: { encode(input?: string): Uint8Array<ArrayBuffer> };
  /**
   * A message of type `output` that Connect's JSON codec writes as `json`.
   * `signal` (the call's) drops the bytes if the call ends before they are written.
   */
  standIn(output: DescMessage, json: Uint8Array<ArrayBuffer>, signal: AbortSignal): Message;
}

export function createStoredJson(): StoredJson {
  const encoder = new TextEncoder();
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
  const standInJson = new RegExp(`^\\{"\\w+":(?:\\[\\{"\\w+":)?"~stored-json~${nonce}~(\\d+)"(?:\\}\\])?\\}$`);
  const pending = new Map<number, Uint8Array<ArrayBuffer>>();
  const carriers = new Map<DescMessage, (key: string) => object>();
  let next = 0;

  return {
    textEncoder: {
      encode(input = "") {
        const match = input.length < 160 ? standInJson.exec(input) : null;
        if (match === null) return encoder.encode(input);
        const key = Number(match[1]);
        const json = pending.get(key);
        // A stand-in is written once, right after its handler answered it: anything else is a bug.
        if (json === undefined) throw new Error(`No stored JSON is waiting under key ${key}.`);
        pending.delete(key);
        return json;
      },
    },
    standIn(output, json, signal) {
      const key = next++;
      pending.set(key, json);
      signal.addEventListener("abort", () => pending.delete(key), { once: true });
      let carrier = carriers.get(output);
      if (carrier === undefined) carriers.set(output, (carrier = carrierOf(output)));
      return create(output, carrier(`~stored-json~${nonce}~${key}`) as never);
    },
  };
}

/** A singular string field of `message`, if it has one. */
function stringField(message: DescMessage): DescField | undefined {
  return message.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING);
}

/**
 * How a stand-in of `output` carries its key: in a string field of its own, else in one item of a list of
 * messages that have one.
 */
function carrierOf(output: DescMessage): (key: string) => object {
  const own = stringField(output);
  if (own !== undefined) return (key) => ({ [own.localName]: key });
  for (const list of output.fields) {
    if (list.fieldKind !== "list" || list.listKind !== "message") continue;
    const inner = stringField(list.message);
    if (inner !== undefined) return (key) => ({ [list.localName]: [{ [inner.localName]: key }] });
  }
  throw new Error(`${output.typeName} has no string field to carry a stored JSON answer.`);
}
