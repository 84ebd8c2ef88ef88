/**
 * A preload for a bench's server (`node --import=./bench/listen-backlog.mjs ...`): every net server's listen() on a
 * port gets the backlog LISTEN_BACKLOG of its environment (Node's default is 511; the kernel caps it at
 * net.core.somaxconn). Measures what a larger listen queue does for a server without a change to its code.
 */
import { Server } from "node:net";

const backlog = Number(process.env.LISTEN_BACKLOG);
if (Number.isInteger(backlog) && backlog > 0) {
  const listen = Server.prototype.listen;
  Server.prototype.listen = function (...args) {
    // listen(port, host, callback) as the service calls it; an options object gets the backlog as a member.
    if (typeof args[0] === "object" && args[0] !== null)
      return listen.call(this, { ...args[0], backlog }, ...args.slice(1));
    if (typeof args[0] === "number" && typeof args[1] === "string")
      return listen.call(this, args[0], args[1], backlog, ...args.slice(2).filter((a) => typeof a === "function"));
    return listen.apply(this, args);
  };
}
