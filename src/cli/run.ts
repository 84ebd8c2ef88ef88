/** The commands of `asor` (docs/cli.md), dispatched; asor.ts is the program that runs them. */
import { applyCommand, diffCommand } from "./apply.js";
import { type CliArgs, parseCliArgs, USAGE } from "./args.js";
import { CliFailure, EXIT_OK, EXIT_USAGE, usageFailure } from "./exit-codes.js";
import { importCommand } from "./import-a2a.js";
import { type CliStreams, Output } from "./output.js";
import { exportCommand, getCommand, listCommand } from "./read-commands.js";
import { RegistryClient } from "./registry-client.js";
import { definitionRules, validateCommand } from "./validate.js";

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

function dispatch(args: CliArgs, output: Output, streams: CliStreams): Promise<number> {
  const rules = () => definitionRules(streams.env);
  const client = () => new RegistryClient(args.url, args.token, args.tenant);
  const applyOptions = { files: args.files, dryRun: args.dryRun, prune: args.prune };
  switch (args.command) {
    case "validate":
      return validateCommand(args.positionals, output, rules());
    case "diff":
      return diffCommand(applyOptions, client, rules(), output);
    case "apply":
      return applyCommand(applyOptions, client, rules(), output);
    case "get":
      return getCommand(args.positionals, client(), output);
    case "list":
      return listCommand(args.positionals, client(), output);
    case "export":
      return exportCommand(args.out, args.positionals, client(), output);
    case "import":
      return importCommand(args.positionals, args.out, rules(), output);
    default:
      throw usageFailure(`unknown command "${args.command}"`);
  }
}
