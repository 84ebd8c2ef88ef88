// The admin command: `npm run admin -- tenant create <name> [--sequence-prefix <prefix>]`,
// `npm run admin -- tenant list`. Works on the database the service is configured with.
import { parseArgs } from "node:util";
import { create, toJsonString } from "@bufbuild/protobuf";
import { CreateTenantRequestSchema, TenantSchema } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { ConfigError, parseConfig } from "../config.js";
import { RegistryError } from "../domain/errors.js";
import { createTenantService } from "../service/tenant-service.js";
import { createSqlRepository } from "../storage/sql-repository.js";

const USAGE = `usage:
  npm run admin -- tenant create <name> [--sequence-prefix <prefix>]
  npm run admin -- tenant list`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { "sequence-prefix": { type: "string" } },
  });
  const [noun, verb, name, ...rest] = positionals;
  const creating = noun === "tenant" && verb === "create" && name !== undefined && rest.length === 0;
  const listing = noun === "tenant" && verb === "list" && name === undefined && values["sequence-prefix"] === undefined;
  if (!creating && !listing) {
    console.error(USAGE);
    return 2;
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
    const tenants = createTenantService(repository);
    if (creating) {
      const prefix = values["sequence-prefix"];
      const tenant = await tenants.create(
        create(CreateTenantRequestSchema, { name, ...(prefix === undefined ? {} : { sequencePrefix: prefix }) }),
      );
      console.log(toJsonString(TenantSchema, tenant));
    } else {
      for (const tenant of await tenants.list()) console.log(toJsonString(TenantSchema, tenant));
    }
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
