#!/usr/bin/env node
/**
 * `vault-rollout <command>`: the CLI entry. Each command is a function of (argv, io) returning an exit code; its flags,
 * help and exit codes come from its spec (specs.ts), parsed with commander (spec.ts).
 */
import { nearest } from '../kernel/nearest.ts';
import { printable } from '../report/printable.ts';
import { commandIo, EXIT, type CliIo, nodeIo, quietOnBrokenPipe } from './io.ts';
import { COMMAND_SPECS, commandSpec } from './specs.ts';
import { parseCommand } from './spec.ts';
import { VERSION } from './version.ts';

type Command = (argv: string[], io: CliIo) => Promise<number>;

/**
 * Each command's module is imported when it runs, not before: `serve` starts without loading the AWS SDK clients
 * that `reconcile` or `import` need (seconds of start-up on a small machine, paid again at every restart).
 */
const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  plan: async () => (await import('./plan-command.ts')).planCommand,
  apply: async () => (await import('./apply-command.ts')).applyCommand,
  doctor: async () => (await import('./doctor-command.ts')).doctorCommand,
  validate: async () => (await import('./validate-command.ts')).validateCommand,
  schema: async () => (await import('./schema-command.ts')).schemaCommand,
  serve: async () => (await import('./serve-command.ts')).serveCommand,
  relay: async () => (await import('./relay-command.ts')).relayCommand,
  worker: async () => (await import('./worker-command.ts')).workerCommand,
  'reset-version': async () => (await import('./reset-version-command.ts')).resetVersionCommand,
  status: async () => (await import('./status-command.ts')).statusCommand,
  halts: async () => (await import('./halts-command.ts')).haltsCommand,
  approve: async () => (await import('./approve-command.ts')).approveCommand,
  notify: async () => (await import('./notify-command.ts')).notifyCommand,
  'admission-policy': async () => (await import('./admission-policy-command.ts')).admissionPolicyCommand,
  import: async () => (await import('./import-command.ts')).importCommand,
  reconcile: async () => (await import('./reconcile-command.ts')).reconcileCommand,
  completion: async () => (await import('./completion.ts')).completionCommand,
};

/** The overview `vault-rollout --help` prints: every command with its summary, from the specs. */
export function usageText(): string {
  const width = Math.max(...COMMAND_SPECS.map((s) => s.name.length)) + 2;
  return `Usage: vault-rollout <command> [options]
       vault-rollout <command> --help      the command's own usage, flags and exit codes
       vault-rollout --version

Commands:
${COMMAND_SPECS.map((s) => `  ${s.name.padEnd(width)}${s.summary}`).join('\n')}

Every command takes --quiet (-q) and --verbose (-v); those that print data take -o/--output (--json is -o json).
These may come before the command too: vault-rollout -q validate routes.yaml
`;
}

/**
 * The global flags (-q, -v; -o FORMAT and --json, which the command checks it prints data for) may come before the
 * command, as `kubectl -n ns get` or `helm --debug install` take them: moved after it, where the command parses them.
 */
function commandFirst(argv: readonly string[]): string[] {
  const leading: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const token = argv[i] as string;
    const flag = ['-q', '--quiet', '-v', '--verbose', '--json'].includes(token) || token.startsWith('--output=');
    if (flag) leading.push(token);
    else if ((token === '-o' || token === '--output') && i + 1 < argv.length) leading.push(token, argv[++i] as string);
    else break;
  }
  return leading.length === 0 || i >= argv.length ? [...argv] : [argv[i] as string, ...leading, ...argv.slice(i + 1)];
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = commandFirst(argv);
  if (name === undefined) {
    io.stderr(usageText());
    return EXIT.usage;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    const about = name === 'help' ? rest[0] : undefined;
    if (about === undefined) {
      io.stdout(usageText());
      return EXIT.ok;
    }
    const spec = commandSpec(about);
    if (!spec) return unknownCommand(io, about);
    return parseCommand(spec, ['--help'], io) as number;
  }
  if (name === '--version' || name === '-V' || name === 'version') {
    io.stdout(`vault-rollout ${VERSION}\n`);
    return EXIT.ok;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) return unknownCommand(io, name);
  return (await load())(rest, commandIo(io, name));
}

/** What, the nearest command when one is near, and where to look: three lines, not the whole usage. */
function unknownCommand(io: CliIo, name: string): number {
  const guess = nearest(
    name,
    COMMAND_SPECS.map((s) => s.name),
  );
  const lines = [
    `vault-rollout: unknown command "${printable(name.slice(0, 40))}"`,
    ...(guess ? [`Did you mean "${guess}"?`] : []),
    'Run "vault-rollout --help" for the commands.',
  ];
  io.stderr(`${lines.join('\n')}\n`);
  return EXIT.usage;
}

if (import.meta.main) {
  quietOnBrokenPipe();
  process.exitCode = await main(process.argv.slice(2), nodeIo());
}
