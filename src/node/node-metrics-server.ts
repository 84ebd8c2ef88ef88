import { createServer, type Server } from "node:http";
import { noResourceAt } from "../domain/errors.js";
import { errorAnswer, type HttpAnswer } from "../http/http-answer.js";
import type { HttpEndpoint } from "../http/http-endpoint.js";
import type { Logger } from "../logger.js";
import { writeAnswer } from "./answer.js";

/** The slow-client bounds of the API port, applied here too. */
export interface MetricsServerOptions {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

/**
 * The metrics port (`METRICS_PORT`): an HTTP/1.1 server that serves
 * `endpoint` (`GET /metrics`) and answers 404 to every other path, so the
 * port can be opened to the monitoring network without exposing the API.
 * Scrapes are neither logged nor counted: a scrape every few seconds would
 * crowd out the API's lines.
 */
export function createNodeMetricsServer(endpoint: HttpEndpoint, options: MetricsServerOptions, logger: Logger): Server {
  return createServer(
    { headersTimeout: options.headersTimeoutMs, requestTimeout: options.requestTimeoutMs },
    (req, res) => {
      const path = new URL(req.url ?? "/", "http://metrics").pathname;
      const answering: Promise<HttpAnswer> =
        path === endpoint.path
          ? endpoint.handle(req.method ?? "GET")
          : Promise.resolve(errorAnswer(noResourceAt(path)));
      answering.then(
        (answer) => writeAnswer(res, answer),
        (error: unknown) => {
          logger.error("the metrics could not be rendered", {
            error: error instanceof Error ? error.message : String(error),
          });
          res.writeHead(500).end();
        },
      );
      // A scrape has no body; whatever a client sends is not read.
      req.resume();
    },
  );
}
