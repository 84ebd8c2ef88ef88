/**
 * The REST door: the bindings of the `google.api.http` rules (surface.ts), a path they know with a verb they
 * do not answered 405 with the verbs it takes.
 */
import { methodNotAllowedAnswer } from "../../http/http-answer.js";
import { watchKeyOf } from "../../operations/watch-limits.js";
import type { Admit, Door, RequestTarget } from "../pipeline/door.js";
import { procedureOf } from "../pipeline/pipeline.js";
import type { RestMatch, RestSurface } from "./surface.js";

export function restDoor(rest: RestSurface, admit: Admit): Door<{ match: RestMatch; target: RequestTarget }> {
  return {
    name: "rest",
    matches(req, target) {
      const match = rest.match(req.method, target.pathname);
      return match === undefined ? undefined : { match, target };
    },
    async serve(req, { match, target }, record) {
      record.protocol = "rest";
      if (match.route === undefined) return { http: methodNotAllowedAnswer(req.method, match.allowed) };
      record.rpc = procedureOf(match.operation);
      // A watch over HTTP/1.1 is also counted by its path and token (src/node/early-watch-refusal.ts).
      const authorization = req.http1 === true ? req.header("authorization") : undefined;
      const watchKey =
        match.route.method.methodKind === "server_streaming" && authorization !== undefined
          ? watchKeyOf(target.pathname, authorization)
          : undefined;
      return rest.serve(match, {
        operation: match.operation,
        admission: await admit(req, match.operation, record, watchKey),
        record,
        pathname: target.pathname,
        query: target.query,
        header: (name) => req.header(name),
        body: () => req.body(),
        clientGone: () => req.clientGone?.() === true,
        http1: req.http1 === true,
      });
    },
  };
}
