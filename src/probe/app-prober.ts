/** The app's prober, as the config sets it (app.ts). */
import type { Config } from "../config.js";
import type { Logger } from "../logger.js";
import type { AgentDefinitionRepository } from "../storage/repository.js";
import { createProber, type Prober } from "./prober.js";
import { probeUserAgent } from "./user-agent.js";

/**
 * The prober (issue 44), unless PROBE_ENABLED is false: probes the ACTIVE versions' agents on its schedule, and on
 * demand (ProbeAgentDefinition).
 */
export function createAppProber(
  config: Config,
  repository: AgentDefinitionRepository,
  logger: Logger,
  probed: (outcome: string, seconds: number) => void,
): Prober | undefined {
  if (!config.probe.enabled) return undefined;
  return createProber({
    repository,
    settings: config.probe,
    userAgent: probeUserAgent(),
    onProbe: (outcome, latencyMs) => probed(outcome, latencyMs / 1000),
    onError: (what, error) => logger.warn(`${what} failed; trying again`, { error: String(error) }),
  });
}
