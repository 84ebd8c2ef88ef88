/**
 * The edge admits each caller once, before any body is read: its bearer token
 * authenticated (one `Authorization` header, never two), then the operation's
 * policy (operations/operation.ts admit). The verdict is the pipeline's second
 * step (pipeline/pipeline.ts), or, on Connect's router, a context value.
 */
import type { Authenticator } from "../auth/authenticator.js";
import { ANONYMOUS, type Principal } from "../auth/principal.js";
import type { TokenRechecks } from "../auth/token-rechecks.js";
import { repeatedHeader } from "../domain/errors.js";
import type { Logger } from "../logger.js";
import type { RequestRecord } from "../observability/request-record.js";
import { admit, type Call } from "../operations/operation.js";
import { type Admit, type EdgeRequest, publicBaseOf } from "./pipeline/door.js";
import { callerError } from "./pipeline/failures.js";
import { procedureOf } from "./pipeline/pipeline.js";

export interface AdmissionOptions {
  readonly authenticator: Authenticator;
  /** Where a stream follows its caller's token (WATCH_TOKEN_RECHECK_MS); without it a token is checked once. */
  readonly rechecks?: TokenRechecks | undefined;
  readonly logger: Logger;
  /** PUBLIC_URL: the base of the absolute URLs answers hold; unset, the request's own authority's. */
  readonly publicUrl?: string | undefined;
}

/** Authentication (once per request) and the operation's policy, before any body is read. */
export function createAdmission({ authenticator, rechecks, logger, publicUrl }: AdmissionOptions): Admit {
  return async (req, operation, record, watchKey) => {
    try {
      // Two tokens: which one speaks for the caller would be a guess (Node reads the first, a proxy may read the last).
      if (req.headerRepeated("authorization")) throw repeatedHeader("Authorization");
      // Without any token, a discovery read goes on as ANONYMOUS: its operation serves only public tenants.
      if (operation.discovery === true && req.header("authorization") === undefined)
        return { call: new EdgeCall(ANONYMOUS, record, req, rechecks, publicUrl, watchKey) };
      const principal = await authenticator.authenticate(req.header("authorization") ?? null);
      admit(operation, principal);
      return { call: new EdgeCall(principal, record, req, rechecks, publicUrl, watchKey) };
    } catch (err) {
      return { error: callerError(err, logger, procedureOf(operation), { record }) };
    }
  };
}

/**
 * An admitted caller's call: its request's signal read only when the operation reads it (a list, a watch): an
 * adapter may make the signal only then (node-edge.ts's StreamRequest does).
 */
class EdgeCall implements Call {
  /** An own property, not a method: a call may be spread. */
  readonly followToken: Call["followToken"];
  constructor(
    readonly principal: Principal,
    readonly record: RequestRecord,
    private readonly req: EdgeRequest,
    rechecks: TokenRechecks | undefined,
    private readonly publicUrl: string | undefined,
    readonly watchKey: string | undefined,
  ) {
    // The header read only when a stream follows its token: a unary call never does.
    this.followToken =
      rechecks === undefined ? undefined : (onRefused) => rechecks.follow(req.header("authorization") ?? "", onRefused);
  }
  get signal(): AbortSignal | undefined {
    return this.req.signal;
  }
  get http1(): boolean | undefined {
    return this.req.http1;
  }
  get publicBase(): string {
    return publicBaseOf(this.req, this.publicUrl);
  }
}
