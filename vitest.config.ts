import { availableParallelism } from "node:os";
import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Probes MySQL once and tells every test file whether the MySQL suite can run.
    globalSetup: ["test/support/global-setup.ts"],
    // Test files at once: vitest's default leaves a core free, one file at a time on a 2-core machine, where most
    // files wait on a database, a child process or a timer; two there. Each file has databases, ports and data
    // dirs of its own (test/support/databases.ts); the cluster project still runs one file at a time. The
    // projects inherit this value, which vitest then prefers to its --maxWorkers flag: TEST_MAX_WORKERS sets it.
    maxWorkers: Number(process.env.TEST_MAX_WORKERS) || Math.max(2, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "main",
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/cluster/**", "test/ui/**"],
        },
      },
      {
        // The catalog in a real browser (test/support/browser.ts: Debian's chromium through playwright-core),
        // skipped with a warning where chromium is missing (failing under CI). Its files build dist/ first when
        // stale, as npm start does.
        extends: true,
        test: {
          name: "ui",
          include: ["test/ui/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          // expect.poll waits for a page to show an answer: as long as a Playwright action may (its 1 s default
          // is shorter than a list's answer on a loaded machine).
          expect: { poll: { timeout: 30_000 } },
        },
      },
      {
        // The suite on a 3-node Galera cluster (test/support/galera.ts): its global setup starts the
        // cluster (or reuses a running one) only when one of these files runs. One file at a time (a
        // file may kill nodes), after the main project (so the cluster does not compete with it).
        extends: true,
        test: {
          name: "cluster",
          include: ["test/cluster/**/*.test.ts"],
          globalSetup: ["test/support/galera-setup.ts"],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
