/**
 * What Node's HTTP/1.1 parser refuses before a request exists (`clientError`),
 * answered in the contract's error shape and logged, instead of Node's bare
 * status line: headers past `--max-http-header-size` (431), a request that
 * did not arrive within HTTP_REQUEST_TIMEOUT_MS (408), bytes that are no HTTP
 * (400). Whatever else (a reset connection) is closed without an answer.
 */
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { headersTooLarge, malformedRequest, type RegistryError, requestTimedOut } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import type { Logger } from "../logger.js";

/** The refusal of a parser error, by its code; undefined when nothing can be answered. */
function refusalOf(code: string | undefined): RegistryError | undefined {
  if (code === "HPE_HEADER_OVERFLOW") return headersTooLarge();
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return requestTimedOut();
  if (code === "ECONNRESET" || code === "EPIPE") return undefined;
  return malformedRequest();
}

/**
 * Whether an answer on `socket` has started already: Node's own clientError handler reads the same private
 * `_httpMessage` (the response the socket is writing). test/node/private-objects.test.ts pins it.
 */
export function responseStarted(socket: Duplex): boolean {
  return (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
}

/** The `clientError` listener of an HTTP/1.1 server: answers what it can, logs it, and closes the connection. */
export function answerParserRefusals(logger: Logger): (error: NodeJS.ErrnoException, socket: Duplex) => void {
  return (error, socket) => {
    const refusal = refusalOf(error.code);
    // A response already under way on this connection, or none that can be written: only close it.
    if (refusal === undefined || responseStarted(socket) || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer = errorAnswer(refusal);
    const body = answer.body ?? new Uint8Array();
    const headers = Object.entries({
      ...answer.headers,
      "content-length": String(body.byteLength),
      connection: "close",
    })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("");
    // Closed once the answer is flushed, as Node's own refusal closes it: a client still sending is not waited for.
    socket.end(
      Buffer.concat([Buffer.from(`HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n${headers}\r\n`), body]),
      () => socket.destroy(),
    );
    logger.info("request refused before it could be read", {
      status: answer.status,
      code: refusal.code,
      reason: error.code ?? "unknown",
    });
  };
}
