// The token command: prints a bearer token from the local development issuer, `npm run token -- --tenant
// default --domains "Development,Setup: Agents" [--ttl 3600] [--subject developer] [--platform-admin]`.
// Without --tenant the token is a platform operator's (the tenant admin RPCs): it carries the platform admin
// claim, as --platform-admin sets it on a tenant's token. Only for the embedded default (no AUTH_ISSUER); the
// key is made in DATA_DIR on first use. The token alone goes to stdout, so `TOKEN=$(npm run -s token -- ...)`
// works.
import { parseArgs } from "node:util";
import { parseAuthConfig } from "../auth/auth-config.js";
import { openLocalIssuer } from "../auth/local-issuer.js";
import { ConfigError, parseConfig } from "../config.js";
import { localIssuerKeyFile } from "./local-issuer-key-file.js";

const USAGE =
  `usage: npm run token -- [--tenant <tenant>] [--domains "Development,Setup: Agents"] [--ttl ` +
  `<seconds>] [--subject <sub>] [--platform-admin]`;

/** The command line, parsed (throws on an unknown or malformed option). */
function parseOptions(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      tenant: { type: "string" },
      domains: { type: "string" },
      ttl: { type: "string", default: "3600" },
      subject: { type: "string", default: "developer" },
      "platform-admin": { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
}

async function main(argv: string[]): Promise<number> {
  let values: ReturnType<typeof parseOptions>["values"];
  try {
    ({ values } = parseOptions(argv));
  } catch (error: unknown) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    return 2;
  }
  if (values.help === true) {
    console.log(USAGE);
    return 0;
  }
  let dataDir: string;
  try {
    dataDir = parseConfig(process.env).dataDir;
  } catch (error: unknown) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(error.message);
    return 1;
  }
  const { config, problems } = parseAuthConfig(process.env);
  if (problems.length > 0) {
    console.error(new ConfigError(problems).message);
    return 1;
  }
  if (config.issuer !== undefined) {
    console.error(
      `AUTH_ISSUER is set (${config.issuer.href}): get a token from that issuer. npm run token only serves the ` +
        `local development issuer.`,
    );
    return 1;
  }
  // The service refuses longer-lived tokens (AUTH_MAX_TOKEN_LIFETIME_SECONDS): none is printed.
  const ttl = Number(values.ttl);
  if (!Number.isInteger(ttl) || ttl <= 0 || ttl > config.maxTokenLifetimeSeconds) {
    console.error(
      `--ttl must be a whole number of seconds from 1 to ${config.maxTokenLifetimeSeconds} ` +
        `(AUTH_MAX_TOKEN_LIFETIME_SECONDS), not "${values.ttl}"\n${USAGE}`,
    );
    return 2;
  }
  const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), config);
  const domains = (values.domains ?? "")
    .split(",")
    .map((d) => d.trim())
    .filter((d) => d !== "");
  const token = await issuer.issue({
    subject: values.subject,
    ...(values.tenant === undefined ? {} : { tenant: values.tenant }),
    domains,
    ttlSeconds: ttl,
    // The platform admin claim is what makes a platform operator; a token without a tenant is meant as one.
    platformAdmin: values["platform-admin"] === true || values.tenant === undefined,
  });
  console.log(token);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
