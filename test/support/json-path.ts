/** The steps of a JSON path as the service writes them: `skills[0].tags[1].tag`. */
function steps(path: string): (string | number)[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? (m[1] as string) : Number(m[2])));
}

/** The value at `path` in `value`, or undefined. */
export function getAt(value: unknown, path: string): any {
  let at: any = value;
  for (const step of steps(path)) at = at?.[step];
  return at;
}

/** Sets the value at `path` in `target` (whose containers must exist). */
export function setAt(target: Record<string, any>, path: string, value: unknown): void {
  const all = steps(path);
  const last = all.pop() as string | number;
  let at: any = target;
  for (const step of all) at = at[step];
  at[last] = value;
}
