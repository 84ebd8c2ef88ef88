import { fromBinary, toJson } from "@bufbuild/protobuf";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";

/** What a Connect unary call over HTTP/1.1 answered, with the error's ValidationError detail decoded. */
export interface ConnectJsonAnswer {
  readonly status: number;
  /** The response body as JSON: the message, or Connect's error `{code, message, details}`. */
  readonly body: any;
  /** The `asor.v1.ValidationError` detail of an error, as JSON, if it has one. */
  readonly validation:
    | { error: string; errors?: { error: string; code: string; field?: string; path?: string }[] }
    | undefined;
}

/**
 * Sends `body` (JSON text, sent byte for byte, or bytes) to a Connect unary
 * RPC as `application/json`, the way a hand-written Connect client would,
 * so tests can send JSON no generated client would produce.
 */
export async function postConnectJson(
  baseUrl: string,
  authorization: string,
  rpc: string,
  body: string | Uint8Array,
): Promise<ConnectJsonAnswer> {
  const res = await fetch(`${baseUrl}/${rpc}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", authorization },
    body: body as BodyInit,
  });
  const text = await res.text();
  const json = text === "" ? undefined : JSON.parse(text);
  const detail = (json?.details as { type: string; value: string }[] | undefined)?.find(
    (d) => d.type === "asor.v1.ValidationError",
  );
  const validation =
    detail === undefined
      ? undefined
      : (toJson(
          ValidationErrorSchema,
          fromBinary(ValidationErrorSchema, Buffer.from(detail.value, "base64")),
        ) as ConnectJsonAnswer["validation"]);
  return { status: res.status, body: json, validation };
}

/** The RPC path of UpsertAgentDefinition. */
export const UPSERT_RPC = "asor.v1.AgentDefinitionService/UpsertAgentDefinition";
