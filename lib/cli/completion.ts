/**
 * `vault-rollout completion bash|zsh|fish`: completion scripts generated from the command specs, so a new flag
 * completes as soon as its spec has it.
 */
import { EXIT, type CliIo } from './io.ts';
import { parseCommand, allOptions, type CommandSpec } from './spec.ts';
import { COMMAND_SPECS, completion } from './specs.ts';

const words = (spec: CommandSpec): string[] =>
  allOptions(spec)
    .flatMap((o) => [
      `--${o.name}`,
      ...(o.negatable ? [`--no-${o.name}`] : []),
      ...(o.short ? [`-${o.short}`] : []),
      '--help',
    ])
    .filter((w, i, all) => all.indexOf(w) === i);
const choices = (spec: CommandSpec): Array<[string, readonly string[]]> =>
  allOptions(spec)
    .filter((o) => o.choices)
    .map((o) => [`--${o.name}`, o.choices as readonly string[]]);
const argChoices = (spec: CommandSpec): readonly string[] => spec.args?.[0]?.choices ?? [];
const quote = (s: string): string => `'${s.replace(/'/g, "'\\''")}'`;

export function bashCompletion(specs: readonly CommandSpec[] = COMMAND_SPECS): string {
  const cases = specs
    .map((s) => {
      const values = choices(s)
        .map(
          ([flag, c]) =>
            `        ${flag}${s.outputs && flag === '--output' ? '|-o' : ''}) COMPREPLY=($(compgen -W ${quote(c.join(' '))} -- "$cur")); return ;;`,
        )
        .join('\n');
      return `    ${s.name})\n      case "$prev" in\n${values}${values ? '\n' : ''}      esac\n      COMPREPLY=($(compgen -W ${quote([...words(s), ...argChoices(s)].join(' '))} -- "$cur")); return ;;`;
    })
    .join('\n');
  return `# bash completion for vault-rollout (vault-rollout completion bash)
_vault_rollout() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ${quote(['help', '--help', '--version', ...specs.map((s) => s.name)].join(' '))} -- "$cur")); return
  fi
  case "\${COMP_WORDS[1]}" in
    help) COMPREPLY=($(compgen -W ${quote(specs.map((s) => s.name).join(' '))} -- "$cur")); return ;;
${cases}
  esac
}
complete -o default -F _vault_rollout vault-rollout
`;
}

export function zshCompletion(specs: readonly CommandSpec[] = COMMAND_SPECS): string {
  const esc = (s: string): string => s.replace(/[[\]:'\\]/g, (c) => `\\${c}`);
  const functions = specs
    .map((s) => {
      const opts = allOptions(s).map((o) => {
        const value =
          o.type === 'boolean' ? '' : o.choices ? `:${o.name}:(${o.choices.join(' ')})` : `:${o.name}:_files`;
        return `    '--${o.name}[${esc(o.summary)}]${value}'`;
      });
      const arg =
        argChoices(s).length > 0
          ? [`    '1:${s.args?.[0]?.name}:(${argChoices(s).join(' ')})'`]
          : s.args?.length
            ? ["    '*:file:_files'"]
            : [];
      return `_vault_rollout_${s.name.replace(/-/g, '_')}() {\n  _arguments \\\n${[...opts, ...arg].join(' \\\n')}\n}`;
    })
    .join('\n\n');
  return `#compdef vault-rollout
# zsh completion for vault-rollout (vault-rollout completion zsh)
${functions}

_vault_rollout() {
  local -a commands
  commands=(
${specs.map((s) => `    '${s.name}:${esc(s.summary)}'`).join('\n')}
  )
  if (( CURRENT == 2 )); then
    _describe 'command' commands
    return
  fi
  local cmd=\${words[2]//-/_}
  shift words
  (( CURRENT-- ))
  (( $+functions[_vault_rollout_$cmd] )) && _vault_rollout_$cmd
}

compdef _vault_rollout vault-rollout
`;
}

export function fishCompletion(specs: readonly CommandSpec[] = COMMAND_SPECS): string {
  const lines = ['# fish completion for vault-rollout (vault-rollout completion fish)', 'complete -c vault-rollout -f'];
  for (const s of specs)
    lines.push(`complete -c vault-rollout -n __fish_use_subcommand -a ${s.name} -d ${quote(s.summary)}`);
  for (const s of specs) {
    const when = `-n '__fish_seen_subcommand_from ${s.name}'`;
    for (const o of allOptions(s))
      lines.push(
        `complete -c vault-rollout ${when} -l ${o.name}${o.short ? ` -s ${o.short}` : ''}${o.type === 'boolean' ? '' : ' -r'}${o.choices ? ` -a ${quote(o.choices.join(' '))}` : ''} -d ${quote(o.summary)}`,
      );
    if (argChoices(s).length > 0) lines.push(`complete -c vault-rollout ${when} -a ${quote(argChoices(s).join(' '))}`);
  }
  return `${lines.join('\n')}\n`;
}

export async function completionCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseCommand(completion, argv, io);
  if (typeof parsed === 'number') return parsed;
  const shell = parsed.args[0];
  io.stdout(shell === 'zsh' ? zshCompletion() : shell === 'fish' ? fishCompletion() : bashCompletion());
  return EXIT.ok;
}
