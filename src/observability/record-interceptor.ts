import { ConnectError, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { codeName, recordOf } from "./request-record.js";

/**
 * Notes each RPC and its outcome on the request's record: the procedure, and
 * the code it ends with. Installed outermost, so it sees the error the caller
 * sees (after the registry's error mapping).
 */
export function recordInterceptor(): Interceptor {
  return (next) => async (req) => {
    const record = recordOf(req.contextValues);
    if (record !== undefined) record.rpc ??= `${req.service.typeName}/${req.method.name}`;
    try {
      const res = await next(req);
      if (record !== undefined) record.code ??= codeName(0);
      return res;
    } catch (err) {
      if (record !== undefined) record.code ??= codeName(ConnectError.from(err).code);
      throw err;
    }
  };
}

/**
 * `routes` with `interceptors` put in front of every service's and method's
 * own, so every RPC (the registry's, health, reflection) is recorded by one
 * installation. A router's own option object replaces its interceptors
 * wholesale, which is why they are prepended here rather than passed to the
 * adapter.
 */
export function withInterceptors(
  routes: (router: ConnectRouter) => void,
  interceptors: Interceptor[],
): (router: ConnectRouter) => void {
  return (router) => {
    const wrapped: ConnectRouter = {
      get handlers() {
        return router.handlers;
      },
      service(service, implementation, options) {
        router.service(service, implementation, {
          ...options,
          interceptors: [...interceptors, ...(options?.interceptors ?? [])],
        });
        return wrapped;
      },
      rpc(method, impl, options) {
        router.rpc(method, impl, { ...options, interceptors: [...interceptors, ...(options?.interceptors ?? [])] });
        return wrapped;
      },
    };
    routes(wrapped);
  };
}
