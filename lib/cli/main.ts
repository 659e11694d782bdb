#!/usr/bin/env node
/**
 * `vault-rollout <command>`: the CLI entry. Each command is a function of (argv, io) returning an exit code; its flags,
 * help and exit codes come from its spec (specs.ts), parsed with commander (spec.ts).
 */
import { EXIT, type CliIo, nodeIo } from './io.ts';
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
`;
}

/** The closest command name, for "did you mean". */
function closest(name: string): string | undefined {
  const distance = (a: string, b: string): number => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) (d[0] as number[])[j] = j;
    for (let i = 1; i <= a.length; i++) for (let j = 1; j <= b.length; j++) (d[i] as number[])[j] = Math.min((d[i - 1] as number[])[j]! + 1, (d[i] as number[])[j - 1]! + 1, (d[i - 1] as number[])[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    return (d[a.length] as number[])[b.length]!;
  };
  const best = COMMAND_SPECS.map((s) => [s.name, distance(name, s.name)] as const).sort((a, b) => a[1] - b[1])[0];
  return best && best[1] <= 2 ? best[0] : undefined;
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
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
  return (await load())(rest, io);
}

function unknownCommand(io: CliIo, name: string): number {
  const guess = closest(name);
  io.stderr(`vault-rollout: unknown command "${name.slice(0, 40)}"${guess ? ` (did you mean ${guess}?)` : ''}\n\n${usageText()}`);
  return EXIT.usage;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2), nodeIo());
}
