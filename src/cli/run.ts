/**
 * The commands of `asor` (docs/cli.md), dispatched; asor.ts is the program that runs them. Each command's
 * modules are imported when it runs: the contract's rules and descriptors are most of the start-up time, which
 * `--help` and a usage error need not pay.
 */
import { type CliArgs, parseCliArgs, USAGE } from "./args.js";
import { CliFailure, EXIT_OK, EXIT_USAGE, usageFailure } from "./exit-codes.js";
import { type CliStreams, Output } from "./output.js";
import { RegistryClient } from "./registry-client.js";

/** Runs the command `argv` names; resolves with its exit code (docs/cli.md). */
export async function runCli(argv: readonly string[], streams: CliStreams): Promise<number> {
  let output = new Output(streams, "text");
  try {
    const args = parseCliArgs(argv, streams.env);
    output = new Output(streams, args.output);
    if (args.help || args.command === undefined || args.command === "help") {
      (args.command === undefined && !args.help ? streams.stderr : streams.stdout).write(`${USAGE}\n`);
      return args.command === undefined && !args.help ? EXIT_USAGE : EXIT_OK;
    }
    return await dispatch(args, output, streams);
  } catch (error) {
    if (error instanceof CliFailure) {
      output.message(`asor: ${error.message}`);
      if (error.exitCode === EXIT_USAGE) output.message("(asor --help for usage)");
      return error.exitCode;
    }
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && /^E[A-Z]+$/.test(code)) {
      output.message(`asor: ${error instanceof Error ? error.message : String(error)}`);
      return EXIT_USAGE;
    }
    throw error;
  }
}

async function dispatch(args: CliArgs, output: Output, streams: CliStreams): Promise<number> {
  const rules = async () => (await import("./validate.js")).definitionRules(streams.env);
  const client = () => new RegistryClient(args.url, args.token, args.tenant);
  const applyOptions = { files: args.files, dryRun: args.dryRun, prune: args.prune };
  switch (args.command) {
    case "validate":
      return (await import("./validate.js")).validateCommand(args.positionals, output, await rules());
    case "diff":
      return (await import("./apply.js")).diffCommand(applyOptions, client, await rules(), output);
    case "apply":
      return (await import("./apply.js")).applyCommand(applyOptions, client, await rules(), output);
    case "get":
      return (await import("./read-commands.js")).getCommand(args.positionals, client(), output);
    case "list":
      return (await import("./read-commands.js")).listCommand(args.positionals, client(), output);
    case "export":
      return (await import("./read-commands.js")).exportCommand(args.out, args.positionals, client(), output);
    case "import":
      return (await import("./import-a2a.js")).importCommand(args.positionals, args.out, await rules(), output);
    default:
      throw usageFailure(`unknown command "${args.command}"`);
  }
}
