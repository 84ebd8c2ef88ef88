/**
 * The chunks of a body as one array. Web APIs only (no Buffer), as the rest of
 * the transport.
 */
export function concatBytes(
  chunks: readonly Uint8Array[],
  size = chunks.reduce((n, c) => n + c.byteLength, 0),
): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
