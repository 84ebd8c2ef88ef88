/**
 * The bytes of a multipart/form-data part as they were sent. The runtime's `formData()` (undici's under Node,
 * Deno's own) decodes a part without a filename as UTF-8 leniently, each bad sequence becoming U+FFFD, so a
 * definition sent so would be stored with U+FFFD where the same JSON body is refused (test/e2e/encoding.test.ts).
 * This reads the part's bytes back out of the body (RFC 7578, RFC 2046 §5.1.1) for the strict check JSON bodies
 * get. It is not a second parser of record: `formData()` has accepted the body and found exactly one part of
 * that name before this is asked.
 */

const CRLF = new Uint8Array([0x0d, 0x0a]);
const CRLF_CRLF = new Uint8Array([0x0d, 0x0a, 0x0d, 0x0a]);

/** The index of `needle` in `haystack` at or after `from`; -1 when absent. */
function indexOf(haystack: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0] as number;
  const last = haystack.length - needle.length;
  for (let i = haystack.indexOf(first, from); i !== -1 && i <= last; i = haystack.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && haystack[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

/** The `boundary` parameter of a multipart Content-Type, quoted or not; undefined when absent. */
function boundaryOf(contentType: string): string | undefined {
  const match = /;\s*boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return match === null ? undefined : (match[1] ?? match[2]);
}

/** The `name` parameter of a part's Content-Disposition header (not `filename`), unquoted. */
function nameOf(headers: string): string | undefined {
  const disposition = /^content-disposition:(.*)$/im.exec(headers)?.[1];
  if (disposition === undefined) return undefined;
  const match = /(?:^|;)\s*name\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/i.exec(disposition);
  return match === null ? undefined : (match[1]?.replace(/\\(.)/g, "$1") ?? match[2]);
}

/**
 * The content of the one part named `part` in the multipart `body`, byte for byte; undefined when the body
 * cannot be read so, or holds no such part or more than one.
 */
export function multipartPartBytes(contentType: string, body: Uint8Array, part: string): Uint8Array | undefined {
  const boundary = boundaryOf(contentType);
  if (boundary === undefined) return undefined;
  const delimiter = new TextEncoder().encode(`\r\n--${boundary}`);
  // The first delimiter may open the body, without the line break before it.
  const opening = delimiter.subarray(2);
  let at = indexOf(body, opening, 0) === 0 ? -2 : indexOf(body, delimiter, 0);
  let found: Uint8Array | undefined;
  while (at !== -1) {
    const after = at + delimiter.length;
    // "--" after a delimiter closes the body.
    if (body[after] === 0x2d && body[after + 1] === 0x2d) return found;
    const lineEnd = indexOf(body, CRLF, after);
    const headersEnd = lineEnd === -1 ? -1 : indexOf(body, CRLF_CRLF, lineEnd);
    if (headersEnd === -1) return undefined;
    const next = indexOf(body, delimiter, headersEnd + 4);
    if (next === -1) return undefined;
    const headers = new TextDecoder("latin1").decode(body.subarray(lineEnd + 2, headersEnd));
    if (nameOf(headers) === part) {
      if (found !== undefined) return undefined;
      found = body.subarray(headersEnd + 4, next);
    }
    at = next;
  }
  return undefined;
}
