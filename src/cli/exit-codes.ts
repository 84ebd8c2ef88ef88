/**
 * The exit codes of `asor` (docs/cli.md): scripts branch on them.
 *
 * - 0: done; nothing wrong found.
 * - 1: problems found: a file is invalid (validate, diff, apply), `diff` found differences, an import could not map
 *   everything it needed, or a definition asked for does not exist.
 * - 2: the command line is wrong (unknown command or flag, a missing argument or setting).
 * - 3: the registry could not be reached, refused the token, or refused a request.
 */
export const EXIT_OK = 0;
export const EXIT_PROBLEMS = 1;
export const EXIT_USAGE = 2;
export const EXIT_REGISTRY = 3;

/** A failure that ends the command with `exitCode` and `message` on stderr. */
export class CliFailure extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** A wrong command line (exit 2). */
export const usageFailure = (message: string): CliFailure => new CliFailure(EXIT_USAGE, message);
