/**
 * What a SQLite worker thread of this folder is started with
 * (sqlite-search-worker.ts, sqlite-checkpointer.ts): the entry's URL, or (Node
 * running the sources) a script that registers tsx's loader in the worker and
 * imports the entry; Node 20 does not apply an `--import tsx` of the worker's
 * execArgv to its entry module.
 */
export function threadEntry(stem: string): { readonly source: URL | string; readonly eval: boolean } {
  const fromSources = import.meta.url.endsWith(".ts");
  const url = new URL(`./${stem}.${fromSources ? "ts" : "js"}`, import.meta.url);
  // Deno runs TypeScript itself, and its workers resolve imports as the main thread does.
  if (!fromSources || "Deno" in globalThis) return { source: url, eval: false };
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  return {
    source: `import(${tsx}).then(({ register }) => { register(); return import(${JSON.stringify(url.href)}); });`,
    eval: true,
  };
}
