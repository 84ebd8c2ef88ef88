import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { grpcMessageEncoded, setGrpcStatus } from "../../src/surfaces/grpc/status.js";

describe("grpc-message as gRPC's spec encodes it (Status-Message)", () => {
  it("keeps printable ASCII but % as it is", () => {
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join("");
    expect(grpcMessageEncoded(printable)).toBe(printable.replace("%", "%25"));
  });

  it("encodes control characters, % and each UTF-8 byte of the rest as %XX, upper case", () => {
    expect(grpcMessageEncoded("a\tb\nc\u007f")).toBe("a%09b%0Ac%7F");
    expect(grpcMessageEncoded("100%")).toBe("100%25");
    expect(grpcMessageEncoded("café ✓ 🙂")).toBe("caf%C3%A9 %E2%9C%93 %F0%9F%99%82");
  });

  it("reads back whole with decodeURIComponent, as Connect's clients decode it", () => {
    const message = "a; b, c: d/e? #f & g=h + $i @ 50% café\n🙂";
    expect(decodeURIComponent(grpcMessageEncoded(message))).toBe(message);
  });

  it("sets the status, the message so encoded and no message for OK", () => {
    const failed = setGrpcStatus(
      new Headers(),
      new ConnectError("pageToken is malformed; pass it back", Code.InvalidArgument),
    );
    expect(failed.get("grpc-status")).toBe("3");
    expect(failed.get("grpc-message")).toBe("pageToken is malformed; pass it back");
    const ok = setGrpcStatus(new Headers(), undefined);
    expect(ok.get("grpc-status")).toBe("0");
    expect(ok.has("grpc-message")).toBe(false);
  });
});
