/**
 * Binary gRPC calls of the registry's RPCs served straight from their HTTP/2 stream (node-server.ts hands each
 * stream here first): Node's compatibility request and response cost what the rest of such a call costs, a
 * tenth of it (BENCHMARKS.md, "Issue 19"). The stream is read as the edge reads a request (StreamRequest), and
 * the edge's answer written with `respond`, the body, then the trailers once the body is out.
 */
import { constants as http2Constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { App } from "../app.js";
import type { StreamAnswer } from "../http/http-answer.js";
import { codeName } from "../observability/request-record.js";
import type { BodyShare } from "../surfaces/body-budget.js";
import type { EdgeRequest, RequestAddresses } from "../surfaces/edge.js";
import { isBinaryGrpc } from "../surfaces/grpc/request.js";
import { callerError } from "../surfaces/pipeline/failures.js";
import { drainedOrClosed, writeAll } from "./answer.js";
import { bodyBytes, bodyShare, clientLeftReason, headerOf, headerRecord, repeatedIn } from "./request.js";
import { authorityOf, socketAddresses } from "./request-origin.js";

/**
 * Serves an HTTP/2 stream itself when it is a binary gRPC call of one of the registry's RPCs (what the Node
 * edge's `handle` does, without Node's compatibility request and response); false for any other stream, which
 * the caller hands on to `handle` through them.
 */
export function createStreamHandler(
  app: App,
): (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders?: readonly string[]) => boolean {
  return (stream, headers, rawHeaders) => {
    const target = headers[":path"] ?? "/";
    const q = target.indexOf("?");
    const path = q === -1 ? target : target.slice(0, q);
    if (headers[":method"] !== "POST" || !app.grpcPaths.has(path) || !isBinaryGrpc(headers["content-type"]))
      return false;
    // A stream the client resets with an error code is destroyed with an error: without a listener it would
    // be the process's (the compatibility layer listens for its own streams). The close below tells what happened.
    stream.on("error", ignore);
    const record = app.requests.start({ method: "POST", path, requestIdHeader: headerOf(headers, "x-request-id") });
    const req = new StreamRequest(target, stream, headers, bodyShare(app, headers), rawHeaders);
    stream.once("close", () => {
      req.share.release();
      const completed = req.answered && !req.reset();
      if (!completed) req.left();
      app.requests.finish(record, {
        status: 200,
        completed,
        wireCode: req.grpcStatus === undefined ? undefined : codeName(Number(req.grpcStatus)),
      });
    });
    app.edge(req, record).then(({ http: answer, stream: streaming }) => {
      if (streaming !== undefined) return void writeGrpcStream(req, record.id, streaming).catch(failed);
      if (answer === undefined || stream.destroyed) return void stream.destroy();
      // Before respond: an answer that fails to be written is logged with the code it carried.
      req.grpcStatus = answer.trailers?.["grpc-status"];
      const head = { ":status": answer.status, "x-request-id": record.id, ...answer.headers };
      // A body refused for want of memory is not read on. The stream is not reset after the answer, as the
      // compatibility path does: a reset right after the trailers reaches the client before them (Node sends
      // RST_STREAM once the writable side finishes, before it asks for the trailers). Unread, the stream's
      // flow control stops the client within one window, and a gRPC client ends the call on the trailers;
      // HTTP_BODY_TIMEOUT_MS cancels what a client keeps open.
      try {
        stream.respond(head, { waitForTrailers: true });
        req.endWith(answer.trailers ?? {}, answer.body ?? undefined);
      } catch (err) {
        failed(err);
      }
    }, failed);
    return true;

    /** The answer could not be made or written: the stream is reset, the failure logged unless the client left. */
    function failed(err: unknown): void {
      if (!req.clientGone()) callerError(err, app.logger, record.rpc ?? path, { record });
      stream.destroy();
    }
  };
}

/** A binary gRPC call's HTTP/2 stream as the edge reads it (handleStream): one object, its methods shared. */
class StreamRequest implements EdgeRequest {
  readonly method = "POST";
  /**
   * The call's signal's controller, made when the signal is first read (a GET or a POST reads none: only a list
   * and a watch stop on it); aborted when the stream closes before its answer was sent.
   */
  #controller: AbortController | undefined;
  /** Whether the client left before the answer was sent. */
  #left = false;
  /** Whether the answer was handed to the stream whole (its trailers asked for). */
  answered = false;
  /** The `grpc-status` the answer ends with, once known. */
  grpcStatus: string | undefined;

  constructor(
    readonly target: string,
    readonly stream: ServerHttp2Stream,
    private readonly headerObject: IncomingHttpHeaders,
    readonly share: BodyShare,
    private readonly rawHeaders: readonly string[] | undefined,
  ) {}

  header(name: string): string | undefined {
    return headerOf(this.headerObject, name);
  }
  headers(): Record<string, string> {
    return headerRecord(this.headerObject);
  }
  headerRepeated(name: string): boolean {
    return repeatedIn(this.rawHeaders, name);
  }
  body(): AsyncIterable<Uint8Array> {
    return this.share.count(this.stream.iterator({ destroyOnReturn: false }));
  }
  bodyBytes(limit: number): Promise<Uint8Array | undefined> {
    return bodyBytes(this.stream, this.share, limit);
  }
  universal(): never {
    throw new Error("A binary gRPC call of a registry RPC is served by the gRPC door, not Connect's router.");
  }
  addresses(): RequestAddresses {
    return socketAddresses(() => this.stream.session?.socket);
  }
  authority(): string | undefined {
    return authorityOf(this.headerObject);
  }
  /** Whether the client reset the stream with an error code. */
  reset(): boolean {
    return (this.stream.rstCode ?? http2Constants.NGHTTP2_NO_ERROR) !== http2Constants.NGHTTP2_NO_ERROR;
  }
  clientGone(): boolean {
    return this.reset() || (this.stream.destroyed && !this.answered);
  }
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#left) this.#controller.abort(clientLeftReason());
    }
    return this.#controller.signal;
  }
  /**
   * Ends the answer (the last of its body, if any) and sends `trailers` once the body is out; from here the call
   * counts as answered, with the trailers' `grpc-status`. The stream's headers were sent with waitForTrailers.
   */
  endWith(trailers: Record<string, string>, body?: Uint8Array): void {
    this.grpcStatus = trailers["grpc-status"];
    pendingTrailers.set(this.stream, trailers);
    this.stream.on("wantTrailers", sendPendingTrailers);
    this.answered = true;
    this.stream.end(body);
  }
  /** The client left before the answer was sent: the signal aborts, now or when it is made. */
  left(): void {
    this.#left = true;
    this.#controller?.abort(clientLeftReason());
  }
}

/** A listener that does nothing (shared: a stream's errors are read from its close). */
function ignore(): void {}

/** The trailers each answered stream sends once its body is out. */
const pendingTrailers = new WeakMap<ServerHttp2Stream, Record<string, string>>();

/** A stream's `wantTrailers` listener (shared, `this` is the stream): sends the trailers its answer left. */
function sendPendingTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(pendingTrailers.get(this) ?? {});
}

/**
 * The gRPC watch's answer: headers at once, each chunk as it comes (waiting while the client's window is
 * full), then the trailers. Only a stream that ended with its trailers was answered: any earlier close (a reset,
 * a connection gone) aborts the call's signal, which ends the watch.
 */
async function writeGrpcStream(req: StreamRequest, requestId: string, streaming: StreamAnswer): Promise<void> {
  const { stream } = req;
  stream.respond(
    { ":status": streaming.status, "x-request-id": requestId, ...streaming.headers },
    { waitForTrailers: true },
  );
  for await (const chunks of streaming.body) {
    if (stream.destroyed) break;
    if (!writeAll(stream, chunks)) await drainedOrClosed(stream);
  }
  if (stream.destroyed) return;
  req.endWith(streaming.trailers());
}
