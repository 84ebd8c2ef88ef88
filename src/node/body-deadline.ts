import type { IncomingMessage, ServerResponse } from "node:http";
import { bodyTimedOut } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import { writeAnswer } from "./answer.js";

/**
 * HTTP/1.1: a body must have arrived whole within `bodyTimeoutMs` (HTTP_BODY_TIMEOUT_MS) of its headers (Node's
 * own request timeout, from the request's first byte, is far longer). Past it the request is answered 408, if its
 * answer has not begun, and its connection closed: a client trickling a body or stopping mid-way holds it (and
 * its share of the body budget) no longer. The registry's own server and the express middleware both set it.
 */
export function bodyDeadline(req: IncomingMessage, res: ServerResponse, bodyTimeoutMs: number): void {
  // Without Content-Length or Transfer-Encoding an HTTP/1.1 request has no body.
  if (req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined) return;
  const timer = setTimeout(() => {
    if (req.complete) return;
    if (res.headersSent) return void req.socket.destroy();
    // Connection: close: the server closes the connection once the answer is out; a client that does not
    // read it is not waited for.
    res.setHeader("connection", "close");
    writeAnswer(res, errorAnswer(bodyTimedOut(bodyTimeoutMs)));
    setTimeout(() => req.socket.destroy(), 1_000).unref();
  }, bodyTimeoutMs);
  // A connection that closes ends the wait too. A request answered before its body ended (a 503 of the body budget,
  // a 401) and then closed emits neither "end" nor "close": without this the timer held it, and every byte of body
  // read for it, until the deadline (600 refused 1 MB bodies held 37 MiB for 10 s; BENCHMARKS.md, issue 25).
  const { socket } = req;
  const clear = (): void => {
    clearTimeout(timer);
    socket.off("close", clear);
  };
  socket.once("close", clear);
  req.once("end", clear);
  req.once("close", clear);
  // Answered with the body whole (read or not): nothing is left to wait for.
  res.once("finish", () => req.complete && clear());
}
