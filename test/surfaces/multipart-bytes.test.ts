import { describe, expect, it } from "vitest";
import { multipartPartBytes } from "../../src/surfaces/rest/multipart-bytes.js";

const bytes = (...parts: (string | number[] | Uint8Array)[]) =>
  new Uint8Array(Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "latin1") : Buffer.from(p)))));
const text = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString("latin1"));
const field = (name: string, content: string | number[], extra = "") =>
  bytes(`content-disposition: form-data; name="${name}"${extra}\r\n\r\n`, content);

describe("multipartPartBytes", () => {
  it("gives the named part's content byte for byte, invalid UTF-8 included", () => {
    const body = bytes("--b\r\n", field("agentCardAndTools", [0x7b, 0xc0, 0xaf, 0x7d]), "\r\n--b--\r\n");
    expect([...(multipartPartBytes("multipart/form-data; boundary=b", body, "agentCardAndTools") ?? [])]).toEqual([
      0x7b, 0xc0, 0xaf, 0x7d,
    ]);
  });

  it("reads a quoted boundary, a preamble, other parts, a filename and part headers", () => {
    const body = bytes(
      "preamble --x y\r\n--x y\r\n",
      field("other", "no"),
      "\r\n--x y\r\n",
      field("agentCardAndTools", "{\r\n}", '; filename="name=\\"x\\".json"\r\ncontent-type: application/json'),
      "\r\n--x y--\r\nepilogue",
    );
    expect(text(multipartPartBytes('multipart/form-data; boundary="x y"', body, "agentCardAndTools"))).toBe("{\r\n}");
  });

  it("gives nothing for a part named twice, a missing part, an unclosed body or no boundary", () => {
    const twice = bytes("--b\r\n", field("p", "1"), "\r\n--b\r\n", field("p", "2"), "\r\n--b--\r\n");
    expect(multipartPartBytes("multipart/form-data; boundary=b", twice, "p")).toBeUndefined();
    const other = bytes("--b\r\n", field("q", "1"), "\r\n--b--\r\n");
    expect(multipartPartBytes("multipart/form-data; boundary=b", other, "p")).toBeUndefined();
    const unclosed = bytes("--b\r\n", field("p", "1"));
    expect(multipartPartBytes("multipart/form-data; boundary=b", unclosed, "p")).toBeUndefined();
    expect(multipartPartBytes("multipart/form-data", other, "q")).toBeUndefined();
  });
});
