import type { Interceptor } from "@connectrpc/connect";

/** A Connect client interceptor sending `authorization` with every call. */
export function withAuthorization(authorization: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", authorization);
    return next(req);
  };
}
