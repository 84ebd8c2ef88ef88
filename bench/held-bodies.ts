/**
 * `npm run bench -- --held-bodies`: issue 25's flood of held bodies. Opens
 * `--sockets` connections (600) to the service, each a REST POST with a valid
 * token declaring a 1,048,576-byte body, sends 1,000,000 bytes of it and then
 * nothing. Samples the service's RSS (from /proc) before, while the sockets
 * hold on (`--hold` seconds, 20), and after they are gone; meanwhile asks
 * /healthz once a second. The target (BENCHMARKS.md): the peak RSS stays under
 * the idle RSS plus MAX_BUFFERED_BODY_BYTES plus 64 MiB. Exits 1 when it does not,
 * or when the service stops answering.
 */
import { connect, type Socket } from "node:net";
import { peakRssKib, resetPeakRss, rssKib } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";

export const HELD_DECLARED = 1_048_576;
export const HELD_SENT = 1_000_000;

export interface HeldBodiesResult {
  readonly sockets: number;
  readonly idleRssMib: number;
  readonly peakRssMib: number;
  /** The RSS when the sockets have held on for `holdSeconds`. */
  readonly heldRssMib: number;
  /** The RSS 5 s after the sockets are gone. */
  readonly afterRssMib: number;
  /** The answers the sockets got before the hold ended, by status ("none": still waiting). */
  readonly answers: Record<string, number>;
  /** Sockets the service closed before the hold ended. */
  readonly closedByServer: number;
  /** Sockets that could not connect or were refused (closed before their request was written). */
  readonly refused: number;
  /** /healthz answers during the hold that were not 200 (or did not come). */
  readonly healthzFailures: number;
  readonly healthzWorstMs: number;
}

const mib = (kib: number): number => kib / 1024;

export async function heldBodies(
  service: ServerProcess,
  authorization: string,
  options: { sockets: number; holdSeconds: number; log(message: string): void },
): Promise<HeldBodiesResult> {
  const { log } = options;
  const idleRssMib = mib(rssKib(service.pid));
  resetPeakRss(service.pid);
  const head = Buffer.from(
    `POST /api/asor/v1/bench/agentDefinition HTTP/1.1\r\nHost: bench\r\nAuthorization: ` +
      `${authorization}\r\nContent-Type: application/json\r\nContent-Length: ${HELD_DECLARED}\r\n\r\n`,
  );
  // One body prefix for all: `{"name": "xxx...`, never closed.
  const body = Buffer.concat([Buffer.from('{"name": "'), Buffer.alloc(HELD_SENT - 10, "x")]);
  /**
   * Each client: its socket, the status of the answer it got ("none" yet), whether its bytes were all
   * written, whether it was closed while holding on.
   */
  const clients: { socket: Socket; status: string; written: boolean; closedWhileHolding: boolean }[] = [];
  let holding = true;
  const open = (): Promise<void> =>
    new Promise((resolve) => {
      const client = {
        socket: connect(service.port, "127.0.0.1"),
        status: "none",
        written: false,
        closedWhileHolding: false,
      };
      const { socket } = client;
      clients.push(client);
      let received = "";
      socket.on("error", () => undefined);
      socket.on("data", (chunk: Buffer) => {
        if (client.status !== "none") return;
        received += chunk.toString("latin1");
        const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
        if (match !== null) client.status = match[1]!;
      });
      // Resolved once the bytes are handed to the socket: a service that does not read them leaves them in
      // the kernel's buffers.
      socket.once("connect", () => {
        socket.write(head);
        socket.write(body, () => {
          client.written = true;
        });
        resolve();
      });
      socket.once("close", () => {
        client.closedWhileHolding = holding;
        resolve();
      });
    });

  let peakSeenKib = 0;
  const sampler = setInterval(() => {
    peakSeenKib = Math.max(peakSeenKib, rssKib(service.pid) || 0);
  }, 100);
  let healthzFailures = 0;
  let healthzWorstMs = 0;
  const prober = setInterval(() => {
    const started = performance.now();
    fetch(`${service.baseUrl}/healthz`, { signal: AbortSignal.timeout(5_000) }).then(
      (res) => {
        healthzWorstMs = Math.max(healthzWorstMs, performance.now() - started);
        if (res.status !== 200) healthzFailures++;
        return res.arrayBuffer();
      },
      () => {
        healthzWorstMs = Math.max(healthzWorstMs, performance.now() - started);
        healthzFailures++;
      },
    );
  }, 1_000);
  try {
    log(
      `held bodies: opening ${options.sockets} sockets, each sending ${HELD_SENT} of a declared ${HELD_DECLARED} ` +
        `bytes; idle RSS ${idleRssMib.toFixed(0)} MiB`,
    );
    // In batches, as a flood of clients would arrive.
    for (let i = 0; i < options.sockets; i += 50)
      await Promise.all(Array.from({ length: Math.min(50, options.sockets - i) }, open));
    log(`held bodies: all written; holding ${options.holdSeconds} s`);
    await new Promise((resolve) => setTimeout(resolve, options.holdSeconds * 1000));
    holding = false;
    const heldRssMib = mib(rssKib(service.pid));
    const answers: Record<string, number> = {};
    for (const { status } of clients) answers[status] = (answers[status] ?? 0) + 1;
    const refused = clients.filter((c) => !c.written && c.closedWhileHolding).length;
    const closedByServer = clients.filter((c) => c.written && c.closedWhileHolding).length;
    for (const { socket } of clients) socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const afterRssMib = mib(rssKib(service.pid));
    const peakRssMib = Math.max(mib(peakRssKib(service.pid) || 0), mib(peakSeenKib));
    return {
      sockets: options.sockets,
      idleRssMib,
      peakRssMib,
      heldRssMib,
      afterRssMib,
      answers,
      closedByServer,
      refused,
      healthzFailures,
      healthzWorstMs,
    };
  } finally {
    clearInterval(sampler);
    clearInterval(prober);
    for (const { socket } of clients) socket.destroy();
  }
}

/** The result as a Markdown table row, and whether it meets the target for a budget of `budgetMib`. */
export function heldBodiesReport(result: HeldBodiesResult, budgetMib: number): { markdown: string; met: boolean } {
  const target = result.idleRssMib + budgetMib + 64;
  const met = result.peakRssMib <= target && result.healthzFailures === 0;
  const answers = Object.entries(result.answers)
    .sort()
    .map(([status, n]) => `${n} × ${status === "none" ? "no answer" : status}`)
    .join(", ");
  const markdown = [
    "| sockets | idle RSS | peak RSS | RSS after the hold | RSS 5 s after | target (idle + budget + 64 MiB) | " +
      "answers during the hold | closed by the service | /healthz |",
    "|---|---|---|---|---|---|---|---|---|",
    `| ${result.sockets} | ${result.idleRssMib.toFixed(0)} MiB | ${result.peakRssMib.toFixed(0)} MiB ` +
      `| ${result.heldRssMib.toFixed(0)} MiB | ${result.afterRssMib.toFixed(0)} MiB ` +
      `| ${target.toFixed(0)} MiB ${met ? "met" : "**missed**"} | ${answers} ` +
      `| ${result.closedByServer}${result.refused > 0 ? ` (+${result.refused} refused)` : ""} ` +
      `| ${result.healthzFailures} failed, worst ${result.healthzWorstMs.toFixed(0)} ms |`,
  ].join("\n");
  return { markdown, met };
}
