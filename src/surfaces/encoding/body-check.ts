/**
 * The one check of a request body's JSON, for REST bodies and the RPCs' JSON
 * messages alike: bytes -> text (strict UTF-8) -> value (strict JSON: no
 * member given twice, nesting bounded; strict-json.ts) -> the members against
 * the message (unknown ones, wrong types, each with its path;
 * json-members.ts) -> issues relative to the body field -> one
 * VALIDATION_FAILED with one summary (problemsMessage). The same body gives
 * the same issues on every surface (test/e2e/rest-rpc-bodies.test.ts).
 */
import { type DescMessage, fromJson, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { relativeToBody } from "../../domain/body-field.js";
import { type Issue, invalid, issueAt, problemsMessage, type RegistryError } from "../../domain/errors.js";
import { jsonIssues } from "./json-members.js";
import { parseStrictJsonText } from "./strict-json.js";

export interface BodyCheckOptions {
  /**
   * The JSON name of the request's body field, when the message checked is
   * the whole request (an RPC's): issues inside it are given relative to it.
   */
  readonly bodyField?: string | undefined;
  /**
   * Also accept the proto names of members (`external_agent_id`), as Connect JSON does; REST takes the JSON
   * names only.
   */
  readonly protoNames?: boolean | undefined;
  /**
   * The name the body is sent under (REST's `agentCardAndTools` part), given as the field of a problem with
   * the body as a whole.
   */
  readonly sentAs?: string | undefined;
}

/** The body's JSON value, checked; or the one error to answer. */
export type BodyCheck =
  | { readonly value: JsonValue; readonly problem?: undefined }
  | { readonly value?: undefined; readonly problem: RegistryError };

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Checks the JSON `bytes` of a body against `desc` (see the top of this file). */
export function checkJsonBody(bytes: Uint8Array, desc: DescMessage, options: BodyCheckOptions = {}): BodyCheck {
  const refuse = (issues: readonly Issue[]): BodyCheck => {
    const relative = relativeToBody(issues, options.bodyField);
    return { problem: invalid(relative, problemsMessage(relative)) };
  };
  const malformed = (message: string): BodyCheck =>
    refuse([
      options.sentAs === undefined
        ? { code: "MALFORMED_JSON", message }
        : issueAt(options.sentAs, "MALFORMED_JSON", message),
    ]);
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    return malformed("The body is not valid UTF-8.");
  }
  if (text.trim() === "") return malformed("The body is empty; a JSON object was expected.");
  let parsed: ReturnType<typeof parseStrictJsonText>;
  try {
    parsed = parseStrictJsonText(text);
  } catch (err) {
    return malformed(`The body is not valid JSON: ${err instanceof SyntaxError ? err.message : "invalid JSON"}.`);
  }
  if (parsed.issues !== undefined) return refuse(parsed.issues);
  const issues = jsonIssues(desc, parsed.value, "", { protoNames: options.protoNames === true });
  return issues.length === 0 ? { value: parsed.value as JsonValue } : refuse(issues);
}

/**
 * The message of a checked JSON value; a rule of protobuf JSON the check does not know is still the request's
 * fault, never a 500.
 */
export function messageOfCheckedJson<Desc extends DescMessage>(desc: Desc, value: JsonValue): MessageShape<Desc> {
  try {
    return fromJson(desc, value);
  } catch (err) {
    const message = `The body cannot be decoded: ${err instanceof Error ? err.message : String(err)}.`;
    throw invalid([{ code: "INVALID_VALUE", message }], message);
  }
}
