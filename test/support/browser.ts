/**
 * A real browser for the catalog's tests: Debian's chromium (`apt-get install chromium`; .ci/run installs it)
 * driven by playwright-core, which downloads nothing. CHROMIUM_PATH points elsewhere. Without the browser the
 * suites are skipped with a warning, and under CI=true they fail instead (as the MySQL suite does).
 */
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Page } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

/** Whether the browser is there; under CI its absence is an error, not a skip. */
export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI === "true") throw new Error(`No chromium at ${CHROMIUM} under CI: .ci/run installs it.`);
  process.stderr.write(`\n*** Browser suite SKIPPED: no chromium at ${CHROMIUM} (apt-get install chromium). ***\n\n`);
  return false;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Where the browser tests put their screenshots (git-ignored; CI keeps the folder as an artefact). */
export const ARTIFACTS = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "test-artifacts", "ui");

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The docs' copy of a page (README.md shows them): the top 1024 by 640 pixels of the page laid out 1024 wide,
 * not the whole page at full size, so a screenshot weighs tens of KB rather than hundreds (a PNG: JPEG saved
 * only 10-20% more and blurs the text). It goes to
 * test-artifacts/ui/docs/ (docs/development.md says how to refresh docs/images/ from there); the page's own
 * viewport is given back afterwards.
 */
export async function docsScreenshot(page: Page, name: string): Promise<string> {
  const dir = join(ARTIFACTS, "docs");
  await mkdir(dir, { recursive: true });
  const viewport = page.viewportSize();
  await page.setViewportSize({ width: 1024, height: 640 });
  try {
    const path = join(dir, `${name}.png`);
    await page.screenshot({ path });
    return path;
  } finally {
    if (viewport !== null) await page.setViewportSize(viewport);
  }
}

/** What a page wrote to its console as errors, and the exceptions it threw, since `watch`. */
export interface ConsoleWatch {
  readonly errors: string[];
  /** Dialogs (alert, confirm, prompt) the page opened: a definition's script running would open one. */
  readonly dialogs: string[];
}

export function watchConsole(page: Page): ConsoleWatch {
  const watch: ConsoleWatch = { errors: [], dialogs: [] };
  page.on("console", (message) => {
    if (message.type() === "error") watch.errors.push(message.text());
  });
  page.on("pageerror", (error) => watch.errors.push(`uncaught: ${error.message}`));
  page.on("dialog", (dialog) => {
    watch.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return watch;
}

const axeSource = readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** A violation of axe-core's rules: its id, impact and the elements it was found on. */
export interface AxeViolation {
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly nodes: string[];
}

/**
 * axe-core's check of the page as it is, its serious and critical violations. The script is evaluated through
 * the DevTools protocol, which the page's Content-Security-Policy does not govern (an injected <script> would be
 * refused, as it should be).
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(await axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: Document): Promise<{ violations: any[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((v) => ({
      id: String(v.id),
      impact: v.impact === undefined ? null : String(v.impact),
      help: String(v.help),
      nodes: (v.nodes as { target: unknown[] }[]).map((n) => n.target.join(" ")),
    }));
  });
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}
