/**
 * The request field a method takes as its HTTP body, from the contract's own
 * `google.api.http` rule, and issues given relative to it: what a client
 * sends as the body (a definition, a status change) is what every surface
 * names the paths of, REST and the RPCs alike (`name`, not
 * `agentCardAndTools.name`).
 */
import { type DescMethod, getOption } from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import { type Issue, RegistryError } from "./errors.js";

/**
 * The JSON name of the one request field `method` takes as its body; undefined for no body or the whole
 * request (`*`).
 */
export function bodyFieldOf(method: DescMethod): string | undefined {
  const body = getOption(method, http).body;
  if (body === "" || body === "*") return undefined;
  return method.input.fields.find((f) => f.name === body)?.jsonName;
}

/** `issues` with the paths inside `bodyField` (and the messages that name them) made relative to it. */
export function relativeToBody(issues: readonly Issue[], bodyField: string | undefined): Issue[] {
  if (bodyField === undefined) return [...issues];
  const prefix = `${bodyField}.`;
  return issues.map((issue) =>
    issue.path?.startsWith(prefix) === true
      ? { ...issue, path: issue.path.slice(prefix.length), message: issue.message.replaceAll(prefix, "") }
      : issue,
  );
}

/**
 * `error` with its issues made relative to `bodyField` (relativeToBody), and
 * its message likewise; anything else as it is. The operations give every
 * error of the service so: the service checks whole requests and need not
 * know which of their fields is the body.
 */
export function errorRelativeToBody(error: unknown, bodyField: string | undefined): unknown {
  if (bodyField === undefined || !(error instanceof RegistryError)) return error;
  const prefix = `${bodyField}.`;
  if (!error.issues.some((issue) => issue.path?.startsWith(prefix) === true)) return error;
  return new RegistryError(error.code, error.message.replaceAll(prefix, ""), relativeToBody(error.issues, bodyField), {
    ...(error.cause === undefined ? {} : { cause: error.cause }),
    designed: error.designed,
  });
}
