import { RegistryError, issueAt } from "../../domain/errors.js";
import { concatBytes } from "../bytes.js";
import { parseStrictJson } from "../strict-json.js";

/** Reads at most `limit` bytes of a body; a longer one is refused with 413 before it is all read. */
export async function readBody(request: Request, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  if (declared > limit) throw tooLarge(limit);
  if (request.body === null) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  return concatBytes(chunks, size);
}

function tooLarge(limit: number): RegistryError {
  const message = `The request body is larger than ${limit} bytes.`;
  return new RegistryError("too_large", "PAYLOAD_TOO_LARGE", message, [{ code: "PAYLOAD_TOO_LARGE", message }]);
}

/** The media type of a request without parameters, lower case ("" when absent). */
export function mediaTypeOf(request: Request): string {
  return (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

const decoder = new TextDecoder("utf-8", { fatal: true });

function malformed(field: string, message: string): RegistryError {
  return new RegistryError("invalid", "VALIDATION_FAILED", message, [issueAt(field, "MALFORMED_JSON", message)]);
}

/**
 * Parses JSON text; malformed text is a 400 naming the problem and where it
 * is, and so are duplicate members and nesting beyond MAX_JSON_DEPTH.
 */
export function parseJson(bytes: Uint8Array, field: string): unknown {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw malformed(field, "The body is not valid UTF-8.");
  }
  if (text.trim() === "") throw malformed(field, "The body is empty; a JSON object was expected.");
  try {
    return parseStrictJson(text);
  } catch (err) {
    if (err instanceof RegistryError) throw err;
    const reason = err instanceof SyntaxError ? err.message : "invalid JSON";
    throw malformed(field, `The body is not valid JSON: ${reason}.`);
  }
}

/**
 * The JSON of the `part` of a multipart/form-data body, sent as a field or a
 * file. Other parts are refused by name, so nothing is silently dropped.
 */
export async function multipartJson(request: Request, bytes: Uint8Array<ArrayBuffer>, part: string): Promise<unknown> {
  let form: FormData;
  try {
    form = await new Request(request.url, { method: "POST", headers: request.headers, body: bytes }).formData();
  } catch {
    const message = "The body is not valid multipart/form-data.";
    throw new RegistryError("invalid", "VALIDATION_FAILED", message, [{ code: "MALFORMED_MULTIPART", message }]);
  }
  const extra = [...form.keys()].filter((k) => k !== part);
  if (extra.length > 0) {
    throw new RegistryError(
      "invalid",
      "VALIDATION_FAILED",
      "The multipart body has unknown parts.",
      extra.map((k) => ({ code: "UNKNOWN_FIELD", message: `Part "${k}" is not part of the contract; send the definition as part "${part}".`, field: k, path: k })),
    );
  }
  const values = form.getAll(part);
  if (values.length !== 1) {
    const message = values.length === 0 ? `The multipart body needs the part "${part}".` : `The multipart body has ${values.length} parts "${part}"; send one.`;
    throw new RegistryError("invalid", "VALIDATION_FAILED", message, [issueAt(part, "REQUIRED", message)]);
  }
  const value = values[0] as FormDataEntryValue;
  const bytesOfPart = typeof value === "string" ? new TextEncoder().encode(value) : new Uint8Array(await value.arrayBuffer());
  return parseJson(bytesOfPart, part);
}
