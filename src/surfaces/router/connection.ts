/**
 * The connection a request came on, as a context value of its RPC: set by the
 * runtime adapter (an HTTP/2 session, an HTTP/1.1 socket), for limits that
 * count per connection (Health/Watch). An object compared by identity only.
 */
import { createContextKey } from "@connectrpc/connect";

export const connectionKey = createContextKey<object | undefined>(undefined, {
  description: "the connection the request came on",
});
