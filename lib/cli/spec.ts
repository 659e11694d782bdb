/**
 * The command framework: one declarative spec per command (lib/cli/specs.ts) is the one source of its parsing (here,
 * with commander), its `--help`, the shell completions (completion.ts) and the CLI reference (reference.ts).
 * Commander never exits the process and never writes to process streams: its output goes through the CliIo, its
 * errors come back as CommanderError and become exit 64 with the command's `--help` named.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { formatDuration, parseDuration } from '../kernel/duration.ts';
import { examplesText } from './examples.ts';
import { EXIT, type CliIo } from './io.ts';

export type OptionType = 'string' | 'boolean' | 'integer' | 'duration' | 'list' | 'enum';

export interface OptionSpec {
  /** The long flag without dashes: `routes` for --routes. The key of the parsed values. */
  readonly name: string;
  readonly short?: string;
  readonly type: OptionType;
  readonly summary: string;
  /** The value's placeholder in usage: FILE, URL, N. */
  readonly arg?: string;
  /** As typed on the command line (a duration as `30s`); parsed by the option's own parser. */
  readonly default?: string | number | boolean | readonly string[];
  /** An environment variable read when the flag is absent. */
  readonly env?: string;
  readonly choices?: readonly string[];
  /** Bounds: integers (inclusive), durations (ms, inclusive). */
  readonly min?: number;
  readonly max?: number;
  /** `--no-NAME` too (a boolean whose absence means "decide"). */
  readonly negatable?: boolean;
  /** Said when an enum's value is none of its choices. */
  readonly choicesHint?: string;
}

export interface ArgSpec {
  readonly name: string;
  readonly summary: string;
  readonly required?: boolean;
  readonly choices?: readonly string[];
}

/** A flag that no longer exists, refused with the one that replaced it. */
export interface RenamedFlag {
  readonly flag: string;
  readonly use: string;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly description: string;
  readonly args?: readonly ArgSpec[];
  readonly options: readonly OptionSpec[];
  /** The formats `-o/--output` offers (the first is the default); absent: the command prints no data. */
  readonly outputs?: readonly string[];
  readonly exits: ReadonlyArray<readonly [number, string]>;
  readonly renamed?: readonly RenamedFlag[];
}

/** What every command accepts. */
export const GLOBAL_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'quiet',
    short: 'q',
    type: 'boolean',
    default: false,
    summary: 'no progress or information on stderr (errors and warnings only)',
  },
  { name: 'verbose', short: 'v', type: 'boolean', default: false, summary: 'debug logs on stderr too' },
];

/** The `-o/--output` and `--json` options of a command that prints data. */
export function outputOptions(spec: CommandSpec): OptionSpec[] {
  if (!spec.outputs) return [];
  return [
    {
      name: 'output',
      short: 'o',
      type: 'enum',
      arg: 'FORMAT',
      choices: spec.outputs,
      default: spec.outputs[0] as string,
      summary: `the output format: ${spec.outputs.join(', ')}`,
      // `import -o FILE` once named the file to write: now --file.
      ...(spec.options.some((o) => o.name === 'file')
        ? { choicesHint: '-o/--output chooses the format; to write to a file use --file FILE' }
        : {}),
    },
    { name: 'json', type: 'boolean', default: false, summary: 'the same as -o json' },
  ];
}

/** Every option of a command as parsed: its own, -o/--json when it prints data, and the global ones. */
export function allOptions(spec: CommandSpec): OptionSpec[] {
  return [...spec.options, ...outputOptions(spec), ...GLOBAL_OPTIONS];
}

type OptionValue<O extends OptionSpec> = O['type'] extends 'boolean'
  ? boolean
  : O['type'] extends 'integer' | 'duration'
    ? number
    : O['type'] extends 'list'
      ? string[]
      : string;
type Always<O extends OptionSpec> = O extends { default: unknown } ? true : O['type'] extends 'list' ? true : false;

/** The parsed values of a spec, keyed by long flag name; a duration in milliseconds. */
export type Values<S extends CommandSpec> = {
  -readonly [O in S['options'][number] as O['name']]: Always<O> extends true
    ? OptionValue<O>
    : OptionValue<O> | undefined;
} & { quiet: boolean; verbose: boolean } & (S extends { outputs: readonly string[] }
    ? { output: S['outputs'][number] }
    : unknown);

export interface Parsed<S extends CommandSpec> {
  values: Values<S>;
  args: string[];
  /** Progress and information on stderr, dropped by --quiet. */
  info(text: string): void;
  /** Debug logs on stderr, only with --verbose. */
  debug(text: string): void;
}

/** `500ms`, `30s`, `10m`, `1h`, `1m30s` (the routing table's grammar too): milliseconds; throws with what to write. */
export function parseCliDuration(text: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) throw new Error(`use a unit: ${text}s`);
  const ms = parseDuration(text);
  if (ms === undefined) throw new Error('a duration such as 500ms, 30s, 10m, 1h or 1m30s');
  return ms;
}

export { formatDuration };

function bounds(o: OptionSpec): string {
  const show = (n: number): string => (o.type === 'duration' ? formatDuration(n) : String(n));
  if (o.min !== undefined && o.max !== undefined) return `from ${show(o.min)} to ${show(o.max)}`;
  if (o.min !== undefined) return `at least ${show(o.min)}`;
  return o.max !== undefined ? `at most ${show(o.max)}` : '';
}

/** Parses one value of an option as typed (command line, environment or default); throws with the reason. */
export function parseValue(o: OptionSpec, text: string): string | number | boolean | string[] {
  switch (o.type) {
    case 'integer': {
      if (!/^-?\d+$/.test(text.trim()))
        throw new Error(`not a whole number: ${text.slice(0, 20)}${bounds(o) ? ` (${bounds(o)})` : ''}`);
      const n = Number(text);
      if ((o.min !== undefined && n < o.min) || (o.max !== undefined && n > o.max))
        throw new Error(`${n} is out of range: ${bounds(o)}`);
      return n;
    }
    case 'duration': {
      const ms = parseCliDuration(text.trim());
      if ((o.min !== undefined && ms < o.min) || (o.max !== undefined && ms > o.max))
        throw new Error(`${text} is out of range: ${bounds(o)}`);
      return ms;
    }
    case 'enum':
      if (!(o.choices ?? []).includes(text))
        throw new Error(`one of ${(o.choices ?? []).join(', ')}${o.choicesHint ? ` (${o.choicesHint})` : ''}`);
      return text;
    case 'list': {
      const items = text.split(',').map((s) => s.trim());
      if (items.some((i) => i === '')) throw new Error('an empty item: give NAME or A,B');
      return items;
    }
    case 'boolean':
      return text === 'true' || text === '1';
    default:
      return text;
  }
}

/** The text of an option's flags in usage: `-o, --output FORMAT`. */
export function flagsText(o: OptionSpec): string {
  const arg =
    o.type === 'boolean'
      ? ''
      : ` ${o.arg ?? (o.type === 'duration' ? 'DURATION' : o.type === 'integer' ? 'N' : o.type === 'list' ? 'A,B' : o.type === 'enum' ? (o.choices ?? []).join('|') : 'VALUE')}`;
  return `${o.short ? `-${o.short}, ` : ''}--${o.name}${arg}`;
}

/** What help and the reference say of an option beyond its summary: type, range, default, environment variable. */
export function optionDetails(o: OptionSpec): string[] {
  const details: string[] = [];
  if (o.type === 'integer' || o.type === 'duration') {
    const b = bounds(o);
    if (b) details.push(b);
  }
  if (o.type === 'list') details.push('repeatable or comma-separated');
  if (o.default !== undefined && o.default !== false && !(Array.isArray(o.default) && o.default.length === 0))
    details.push(`default: ${Array.isArray(o.default) ? o.default.join(',') : String(o.default)}`);
  if (o.env) details.push(`env: ${o.env}`);
  return details;
}

/** The text after the options in `--help`: what the command does and its exit codes. */
export function helpFooter(spec: CommandSpec): string {
  const exits = spec.exits.map(([code, meaning]) => `  ${String(code).padEnd(3)} ${meaning}`).join('\n');
  return `\n${spec.description}\n${examplesText(spec.name)}\nExit codes:\n${exits}\n  64  usage error (an unknown or invalid flag or argument)\n`;
}

/** `Usage: vault-rollout plan [options] FILE` */
export function usageLine(spec: CommandSpec): string {
  const args = (spec.args ?? []).map((a) => (a.required ? `<${a.name}>` : `[${a.name}]`)).join(' ');
  return `vault-rollout ${spec.name} [options]${args ? ` ${args}` : ''}`;
}

class UsageError extends Error {}

/**
 * Parses a command's argv by its spec: `--help` prints the command's usage (exit 0), a wrong flag or value prints why
 * and the command's `--help` (exit 64). Returns the parsed values, or the exit code to return.
 */
export function parseCommand<S extends CommandSpec>(spec: S, argv: readonly string[], io: CliIo): Parsed<S> | number {
  const usage = (message: string): number => {
    io.stderr(`vault-rollout ${spec.name}: ${message}\nRun "vault-rollout ${spec.name} --help" for usage.\n`);
    return EXIT.usage;
  };
  const renamed = renamedFlagMessage(spec, argv);
  if (renamed !== undefined) return usage(renamed);
  const options = allOptions(spec);
  const program = commandProgram(spec, options, io);
  let args: string[] = [];
  program.action((...received: unknown[]) => {
    args = received.slice(0, (spec.args ?? []).length).filter((a): a is string => typeof a === 'string');
  });
  try {
    program.parse([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.help' || e.code === 'commander.version')
        return EXIT.ok;
      return usage(commanderMessage(e));
    }
    throw e;
  }
  let values: Record<string, unknown>;
  try {
    values = optionValues(options, program.opts(), io);
    checkArgumentChoices(spec, args);
  } catch (e) {
    if (e instanceof UsageError) return usage(e.message);
    throw e;
  }
  if (spec.outputs) {
    if (values.json === true) {
      if (program.getOptionValueSource('output') === 'cli' && values.output !== 'json')
        return usage(`--json is -o json: give one of them`);
      values.output = 'json';
    }
  }
  return parsedWithLogging(spec, values, args, io);
}

/** Why a flag that was renamed is refused (before anything else is parsed), if argv gives one. */
function renamedFlagMessage(spec: CommandSpec, argv: readonly string[]): string | undefined {
  const end = argv.indexOf('--');
  for (const token of end < 0 ? argv : argv.slice(0, end)) {
    const renamed = spec.renamed?.find((r) => token === r.flag || token.startsWith(`${r.flag}=`));
    if (renamed) return `${renamed.flag} is no longer accepted: use ${renamed.use}`;
  }
  return undefined;
}

/** The commander program of a spec: its help text, arguments and options, writing to the command's io. */
function commandProgram(spec: CommandSpec, options: readonly OptionSpec[], io: CliIo): Command {
  const program = new Command(`vault-rollout ${spec.name}`)
    .description(spec.summary)
    .usage(usageLine(spec).slice(`vault-rollout ${spec.name} `.length))
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s), outputError: () => undefined })
    .helpOption('-h, --help', 'print this help')
    .allowExcessArguments(false)
    .addHelpText('after', helpFooter(spec));
  for (const a of spec.args ?? []) program.argument(a.required ? `<${a.name}>` : `[${a.name}]`, a.summary);
  for (const o of options) {
    program.addOption(commanderOption(o));
    if (o.negatable) program.addOption(new Option(`--no-${o.name}`, `not --${o.name}`));
  }
  return program;
}

/** One option for commander: its flags, its description with details, and its value parser (lists accumulate). */
function commanderOption(o: OptionSpec): Option {
  const details = optionDetails(o);
  const description = `${o.summary}${details.length > 0 ? ` (${details.join('; ')})` : ''}`;
  const flags = flagsText(o).replace(/ (\S+)$/, o.type === 'boolean' ? ' $1' : ' <$1>');
  const option = new Option(flags, description);
  if (o.type !== 'boolean') {
    option.argParser((value: string, previous: unknown) => {
      let parsed;
      try {
        parsed = parseValue(o, value);
      } catch (e) {
        throw new InvalidArgumentError(e instanceof Error ? e.message : String(e));
      }
      return o.type === 'list'
        ? [...(Array.isArray(previous) ? (previous as string[]) : []), ...(parsed as string[])]
        : parsed;
    });
  }
  return option;
}

/** A commander error as the usage message says it. */
function commanderMessage(e: CommanderError): string {
  const message = e.message.replace(/^error: /, '');
  // "option '--grace <DURATION>' argument '10' is invalid. use a unit: 10s" -> "--grace 10: use a unit: 10s"
  const invalid = /^option '(?:-\w, )?(--[\w-]+)[^']*' argument '(.*)' is invalid\. ([\s\S]*)$/.exec(message);
  // One quote style: commander's 'x' becomes "x", as every other message writes it.
  return invalid ? `${invalid[1]} ${invalid[2]}: ${invalid[3]}` : message.replace(/'([^'\n]*)'/g, '"$1"');
}

/** Each option's value: given, else from its environment variable, else its default; throws UsageError. */
function optionValues(
  options: readonly OptionSpec[],
  raw: Record<string, unknown>,
  io: CliIo,
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const o of options) {
    const key = new Option(`--${o.name}`).attributeName();
    let value = raw[key];
    if (value === undefined && o.env !== undefined && io.env[o.env]) {
      const fromEnv = io.env[o.env] as string;
      try {
        value = parseValue(o, fromEnv);
      } catch (e) {
        throw new UsageError(`${o.env}=${fromEnv.slice(0, 40)}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (value === undefined && o.default !== undefined)
      value =
        typeof o.default === 'string' && o.type !== 'string' && o.type !== 'enum'
          ? parseValue(o, o.default)
          : o.default;
    if (value === undefined && o.type === 'list') value = [];
    values[o.name] = Array.isArray(value) ? [...(value as string[])] : value;
  }
  return values;
}

/** Throws UsageError when an argument with choices is given another value. */
function checkArgumentChoices(spec: CommandSpec, args: readonly string[]): void {
  for (const [i, a] of (spec.args ?? []).entries()) {
    const given = args[i];
    if (given !== undefined && a.choices && !a.choices.includes(given))
      throw new UsageError(`${a.name} is one of ${a.choices.join(', ')}, not ${given.slice(0, 40)}`);
  }
}

/** The parsed command with its info and debug writers (--quiet, --verbose); --verbose shows the flags first. */
function parsedWithLogging<S extends CommandSpec>(
  spec: S,
  values: Record<string, unknown>,
  args: string[],
  io: CliIo,
): Parsed<S> {
  const quiet = values.quiet === true;
  const verbose = values.verbose === true && !quiet;
  // Flags carry no secrets (those come from the environment and files), so all of them can be shown.
  if (verbose)
    io.stderr(
      `vault-rollout ${spec.name}: debug: flags ${JSON.stringify(values)}${args.length > 0 ? ` arguments ${JSON.stringify(args)}` : ''}\n`,
    );
  return {
    values: values as Values<S>,
    args,
    info: (text) => {
      if (!quiet) io.stderr(text);
    },
    debug: (text) => {
      if (verbose) io.stderr(`vault-rollout ${spec.name}: debug: ${text}\n`);
    },
  };
}

/** A usage error found after parsing (a flag that needs another, a value the command checks itself). */
export function usageError(io: CliIo, command: string, e: unknown): number {
  io.stderr(
    `vault-rollout ${command}: ${e instanceof Error ? e.message : String(e)}\nRun "vault-rollout ${command} --help" for usage.\n`,
  );
  return EXIT.usage;
}
