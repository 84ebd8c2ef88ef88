import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorSchema, ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { ERRORS, type ErrorCode, RegistryError } from "../../src/domain/errors.js";
import { errorAnswer } from "../../src/http/http-answer.js";
import { toConnectError } from "../../src/surfaces/pipeline/rpc-errors.js";

const codes = Object.keys(ERRORS) as ErrorCode[];

describe("the error table", () => {
  it(
    "gives every code a real gRPC code, an HTTP error status and the contract's body shape for it " +
      "(docs/contract.md, Errors)",
    () => {
      for (const code of codes) {
        const row = ERRORS[code];
        expect(Code[row.grpc], code).toBeTypeOf("number");
        expect(row.http, code).toBeGreaterThanOrEqual(400);
        // 4xx carry the validation error body, anything else the plain one.
        expect(row.body, code).toBe(row.http < 500 ? "validation" : "error");
        expect(row.meaning.length, code).toBeGreaterThan(10);
      }
    },
  );

  it.each(codes)("answers %s the same way over REST and the RPCs", (code) => {
    const err = new RegistryError(code, `${code} happened`, [
      { code, message: "one problem", field: "f", path: "a.f" },
    ]);
    const answer = errorAnswer(err);
    expect(answer.status).toBe(ERRORS[code].http);
    const body = JSON.parse(new TextDecoder().decode(answer.body ?? new Uint8Array()));
    const rpc = toConnectError(err);
    expect(rpc).toBeInstanceOf(ConnectError);
    expect(rpc.code).toBe(Code[ERRORS[code].grpc]);
    if (ERRORS[code].body === "validation") {
      expect(body).toEqual({
        error: `${code} happened`,
        errors: [{ error: "one problem", code, field: "f", path: "a.f" }],
      });
      expect(rpc.findDetails(ValidationErrorSchema)[0]).toMatchObject({
        error: `${code} happened`,
        errors: [{ error: "one problem", code, field: "f", path: "a.f" }],
      });
    } else {
      expect(body).toEqual({ error: `${code} happened`, code });
      expect(rpc.findDetails(ErrorSchema)[0]).toMatchObject({ error: `${code} happened`, code });
    }
  });

  it("challenges 401 and 403 answers with Bearer, on both surfaces", () => {
    for (const code of ["UNAUTHENTICATED", "PERMISSION_DENIED"] as const) {
      const err = new RegistryError(code, "no");
      expect(errorAnswer(err).headers["www-authenticate"]).toMatch(/^Bearer realm="asor"/);
      expect(toConnectError(err).metadata.get("www-authenticate")).toMatch(/^Bearer realm="asor"/);
    }
    expect(errorAnswer(new RegistryError("NOT_FOUND", "no")).headers["www-authenticate"]).toBeUndefined();
  });

  it(
    "answers a too-large body 413 over REST and RESOURCE_EXHAUSTED over the RPCs, a wrong media type 415 and " +
      "INVALID_ARGUMENT",
    () => {
      expect(ERRORS.PAYLOAD_TOO_LARGE).toMatchObject({ http: 413, grpc: "ResourceExhausted" });
      expect(ERRORS.UNSUPPORTED_MEDIA_TYPE).toMatchObject({ http: 415, grpc: "InvalidArgument" });
    },
  );
});
