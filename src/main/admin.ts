// The admin command (usage below). Works on the database the service is configured with, as the platform
// operator: the same services as the tenant admin RPCs, without a token.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { create, fromJson, type JsonValue, toJsonString } from "@bufbuild/protobuf";
import {
  CreateTenantRequestSchema,
  GetProviderKeysRequestSchema,
  GetTenantRequestSchema,
  JsonWebKeySetSchema,
  ProviderKeysSchema,
  RevokeProviderKeyRequestSchema,
  SetProviderKeysRequestSchema,
  TenantSchema,
  TenantSettings_Discovery,
  TenantSettings_Signatures,
  UpdateTenantRequestSchema,
} from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { ConfigError, parseConfig } from "../config.js";
import { invalid, issueAt, RegistryError } from "../domain/errors.js";
import { DISCOVERY_POLICIES, SIGNATURE_POLICIES } from "../domain/tenant-admin.js";
import { createProviderKeyService } from "../service/provider-key-service.js";
import { createTenantService } from "../service/tenant-service.js";
import { createSqlRepository } from "../storage/sql-repository.js";
import { jsonIssues } from "../surfaces/encoding/json-members.js";

const USAGE = `usage:
  npm run admin -- tenant create <name> [--sequence-prefix <prefix>]
  npm run admin -- tenant list
  npm run admin -- tenant get <name>
  npm run admin -- tenant set <name> [--signatures ${SIGNATURE_POLICIES.join("|")}]
                                     [--discovery ${DISCOVERY_POLICIES.join("|")}]
  npm run admin -- provider-keys set <tenant> <providerId> <jwks-file>
  npm run admin -- provider-keys list <tenant> <providerId>
  npm run admin -- provider-keys revoke <tenant> <providerId> <kid>`;

type Services = {
  readonly tenants: ReturnType<typeof createTenantService>;
  readonly keys: ReturnType<typeof createProviderKeyService>;
};

/** What one command does, printing its answer as JSON lines. */
type Command = (services: Services) => Promise<string[]>;

/** `--help` (`-h`): the usage on stdout, exit 0, without opening the database. */
const HELP: Command = async () => [USAGE];

/** The command `argv` names, or undefined (then the usage is printed). */
function commandOf(argv: string[]): Command | undefined {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "sequence-prefix": { type: "string" },
      signatures: { type: "string" },
      discovery: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return HELP;
  const [noun, verb, ...rest] = positionals;
  const prefix = values["sequence-prefix"];
  const { signatures, discovery } = values;
  const options = (allowed: string[]) =>
    (prefix === undefined || allowed.includes("sequence-prefix")) &&
    (signatures === undefined || allowed.includes("signatures")) &&
    (discovery === undefined || allowed.includes("discovery"));
  const [a, b, c] = rest;
  const args = (n: number) => rest.length === n;
  if (noun === "tenant" && verb === "create" && args(1) && options(["sequence-prefix"]))
    return async ({ tenants }) => [
      toJsonString(
        TenantSchema,
        await tenants.create(
          create(CreateTenantRequestSchema, { name: a, ...(prefix === undefined ? {} : { sequencePrefix: prefix }) }),
        ),
      ),
    ];
  if (noun === "tenant" && verb === "list" && args(0) && options([]))
    return async ({ tenants }) => (await tenants.list()).map((t) => toJsonString(TenantSchema, t));
  if (noun === "tenant" && verb === "get" && args(1) && options([]))
    return async ({ tenants }) => [
      toJsonString(TenantSchema, await tenants.get(create(GetTenantRequestSchema, { name: a }))),
    ];
  const settings = { signatures, discovery };
  if (noun === "tenant" && verb === "set" && args(1) && (signatures ?? discovery) !== undefined)
    return async ({ tenants }) => [toJsonString(TenantSchema, await tenants.update(settingsRequest(a!, settings)))];
  if (noun === "provider-keys" && verb === "set" && args(3) && options([]))
    return async ({ keys }) => [
      toJsonString(
        ProviderKeysSchema,
        await keys.set(create(SetProviderKeysRequestSchema, { tenant: a, providerId: b, jwks: await readJwks(c!) })),
      ),
    ];
  if (noun === "provider-keys" && verb === "list" && args(2) && options([]))
    return async ({ keys }) => [
      toJsonString(
        ProviderKeysSchema,
        await keys.get(create(GetProviderKeysRequestSchema, { tenant: a, providerId: b })),
      ),
    ];
  if (noun === "provider-keys" && verb === "revoke" && args(3) && options([]))
    return async ({ keys }) => [
      toJsonString(
        ProviderKeysSchema,
        await keys.revoke(create(RevokeProviderKeyRequestSchema, { tenant: a, providerId: b, kid: c })),
      ),
    ];
  return undefined;
}

/** The request of `tenant set`: each setting by its name, refused (VALIDATION_FAILED) when it names none. */
function settingsRequest(name: string, given: { signatures?: string | undefined; discovery?: string | undefined }) {
  const pick = <T extends string>(option: string, value: string | undefined, values: readonly T[]): T | undefined => {
    if (value === undefined) return undefined;
    const found = values.find((v) => v === value);
    if (found === undefined)
      throw invalid([issueAt(option, "NOT_ALLOWED", `--${option} must be one of ${values.join(", ")}.`)]);
    return found;
  };
  const signatures = pick("signatures", given.signatures, SIGNATURE_POLICIES);
  const discovery = pick("discovery", given.discovery, DISCOVERY_POLICIES);
  return create(UpdateTenantRequestSchema, {
    name,
    settings: {
      ...(signatures === undefined ? {} : { signatures: TenantSettings_Signatures[signatures] }),
      ...(discovery === undefined ? {} : { discovery: TenantSettings_Discovery[discovery] }),
    },
  });
}

/** The JWKS of a file, checked as the REST surface checks a body: every unknown member named with its path. */
async function readJwks(file: string) {
  let json: JsonValue;
  try {
    json = JSON.parse(await readFile(file, "utf8")) as JsonValue;
  } catch (error) {
    throw invalid([{ code: "MALFORMED_JSON", message: `${file} is not a JSON file: ${(error as Error).message}` }]);
  }
  const issues = jsonIssues(JsonWebKeySetSchema, json);
  if (issues.length > 0) throw invalid(issues);
  return fromJson(JsonWebKeySetSchema, json);
}

async function main(argv: string[]): Promise<number> {
  let command: Command | undefined;
  try {
    command = commandOf(argv);
  } catch (error) {
    // parseArgs's refusal of an unknown or malformed option: said, with the usage.
    console.error(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    return 2;
  }
  if (command === undefined) {
    console.error(USAGE);
    return 2;
  }
  if (command === HELP) {
    console.log(USAGE);
    return 0;
  }
  const config = parseConfig(process.env);
  const repository = await createSqlRepository({
    databaseUrl: config.databaseUrl,
    databaseWriteUrl: config.databaseWriteUrl,
    dataDir: config.dataDir,
    timeoutMs: config.databaseTimeoutMs,
    checkpointIntervalMs: config.sqliteCheckpointIntervalMs,
  });
  try {
    const lines = await command({
      tenants: createTenantService(repository),
      keys: createProviderKeyService(repository),
    });
    for (const line of lines) console.log(line);
    return 0;
  } finally {
    await repository.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof RegistryError) {
      const others = err.issues.filter((i) => i.message !== err.message).map((i) => i.message);
      console.error(`${err.code}: ${[err.message, ...others].join(" ")}`);
    } else if (err instanceof ConfigError || (err instanceof TypeError && "code" in err)) {
      console.error(err.message);
    } else {
      console.error(err);
    }
    process.exit(1);
  },
);
