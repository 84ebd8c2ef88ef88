import { type ConnectRouter, type ContextValues, createConnectRouter, type Transport } from "@connectrpc/connect";
import { createUniversalHandlerClient, type UniversalHandler, type UniversalServerRequest } from "@connectrpc/connect/protocol";
import { createTransport } from "@connectrpc/connect/protocol-connect";

/**
 * A Connect transport that calls `routes` in this process, like connect's
 * createRouterTransport, except that the server side sees the caller's
 * context values: connect's in-memory client starts the handler with empty
 * ones, which would cut a REST request off from its record (tenant, outcome)
 * made at the edge. The router is built once; a call only binds its values.
 */
export function createInProcessTransport(routes: (router: ConnectRouter) => void): (contextValues?: ContextValues) => Transport {
  const router = createConnectRouter();
  routes(router);
  const handlers = router.handlers;
  const unbound = createTransportOver(handlers);
  return (contextValues) => {
    if (contextValues === undefined) return unbound;
    // createUniversalHandlerClient only routes by requestPath and calls the handler.
    const bound = handlers.map((handler) =>
      Object.assign((req: UniversalServerRequest) => handler({ ...req, contextValues }), { requestPath: handler.requestPath }),
    ) as unknown as UniversalHandler[];
    return createTransportOver(bound);
  };
}

function createTransportOver(handlers: UniversalHandler[]): Transport {
  // The options of createRouterTransport: binary, no compression, no size limits (the bytes never leave the process).
  return createTransport({
    httpClient: createUniversalHandlerClient(handlers),
    baseUrl: "https://in-memory",
    useBinaryFormat: true,
    interceptors: [],
    acceptCompression: [],
    sendCompression: null,
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    readMaxBytes: Number.MAX_SAFE_INTEGER,
    writeMaxBytes: Number.MAX_SAFE_INTEGER,
  });
}
