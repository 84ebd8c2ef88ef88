import { type HttpAnswer, headOnly, methodNotAllowedAnswer } from "./http-answer.js";

/** A plain HTTP endpoint at an exact path, outside the API: no authentication, no tenant (probes, metrics, OpenAPI). */
export interface HttpEndpoint {
  readonly path: string;
  handle(method: string): Promise<HttpAnswer>;
}

/** An endpoint that answers GET and HEAD only. */
export function readOnly(answer: () => Promise<HttpAnswer>): (method: string) => Promise<HttpAnswer> {
  return async (method) => {
    if (method !== "GET" && method !== "HEAD") return methodNotAllowedAnswer(method, ["GET", "HEAD"]);
    const answered = await answer();
    return method === "HEAD" ? headOnly(answered) : answered;
  };
}
