/**
 * What signing an agent card costs the process (issue 43): `node --import tsx bench/card-signing.ts [count]`.
 * In one run, interleaved in rounds: the bench definition's card rendered and its canonical payload made
 * (agentCardPayload), an ES256 signature of it (jose on WebCrypto) and an EdDSA one, the card rendered from the
 * definition (every read does that, signed or not), and with it the signer's first read of a revision and a read
 * that finds the signature in its cache (every read of a revision but the first). Prints CPU µs per operation,
 * the median of the rounds.
 */
import { fromJson, type JsonObject } from "@bufbuild/protobuf";
import { exportJWK, generateKeyPair } from "jose";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { renderAgentCard } from "../src/domain/agent-card.js";
import { parseCardKeys } from "../src/domain/card-keys.js";
import { agentCardPayload } from "../src/domain/card-payload.js";
import { createCardSigner, signPayload } from "../src/service/card-signer.js";
import { benchDefinition } from "./definition.js";

const count = Number(process.argv[2] ?? 2000);
const ROUNDS = 5;
const definition = fromJson(AgentDefinitionSchema, benchDefinition("Signed bench agent") as JsonObject);
const card = renderAgentCard(definition);

async function keyOf(alg: "ES256" | "EdDSA") {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return privateKey;
}
const es256 = await keyOf("ES256");
const eddsa = await keyOf("EdDSA");
const jwk = { ...(await exportJWK(await keyOf("ES256"))), kid: "bench" };
const signer = await createCardSigner(parseCardKeys([{ jwk, location: "bench" }]).keys, { overlapMs: 0 });
await signer.sign("cached", renderAgentCard(definition));

/** CPU µs of this process per call of `op` (WebCrypto's thread pool included), over `count` calls in turn. */
async function timed(op: (i: number) => unknown): Promise<number> {
  const t0 = process.cpuUsage();
  for (let i = 0; i < count; i++) await op(i);
  const { user, system } = process.cpuUsage(t0);
  return (user + system) / count;
}

const header = (alg: string) => ({ alg, typ: "JOSE", kid: "bench", iat: 1 }) as const;
const payload = agentCardPayload(card);
const ops: Record<string, (i: number) => unknown> = {
  "payload (JCS of the card)": () => agentCardPayload(card),
  "ES256 signature": () => signPayload(es256, header("ES256"), payload),
  "EdDSA signature": () => signPayload(eddsa, header("EdDSA"), payload),
  "card rendered (what each read does anyway)": () => renderAgentCard(definition),
  "rendered + first read of a revision (payload + ES256)": (i) =>
    signer.sign(`new ${i} ${Math.random()}`, renderAgentCard(definition)),
  "rendered + read of a revision signed before (cache)": () => signer.sign("cached", renderAgentCard(definition)),
};
const results = new Map<string, number[]>(Object.keys(ops).map((name) => [name, []]));
for (let round = 0; round < ROUNDS; round++)
  for (const [name, op] of Object.entries(ops)) results.get(name)!.push(await timed(op));
console.log(`${count} calls a round, ${ROUNDS} rounds, payload ${payload.length} bytes`);
console.log("CPU µs per call, the median of the rounds:");
for (const [name, values] of results) {
  const median = [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  console.log(`${name.padEnd(56)} ${median.toFixed(1)}`);
}
