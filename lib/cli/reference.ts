/**
 * The CLI reference page (docs/reference/cli.md, written by `npm run docs:reference`), generated from the command specs
 * (lib/cli/specs.ts): every command, its usage, each option with its
 * type, default, bounds and environment variable, and its exit codes.
 */
import { allOptions, flagsText, optionDetails, usageLine, type CommandSpec } from './spec.ts';
import { EXAMPLES, exampleLine } from './examples.ts';
import { COMMAND_SPECS } from './specs.ts';

/** Every command's spec, in the order of the reference. */
export const CLI_SPECS: readonly CommandSpec[] = COMMAND_SPECS;

const cell = (s: string): string => s.replace(/\|/g, '\\|');

export function cliReferenceMarkdown(): string {
  const out: string[] = [
    '# CLI reference',
    '',
    'Every command takes `--help` (its usage, flags and exit codes), `--quiet`/`-q` (no progress or information on stderr) and `--verbose`/`-v` (debug logs). Commands that print data take `-o`/`--output` (`--json` is `-o json`); these global flags may come before the command too (`vault-rollout -q validate routes.yaml`). Durations take a unit (in the routing table too): `500ms`, `30s`, `10m`, `1h`, `1m30s`. A usage error (unknown flag, bad value) exits 64.',
    '',
  ];
  for (const spec of CLI_SPECS) {
    out.push(`## ${spec.name}`, '', spec.summary + '.', '', '```', usageLine(spec), '```', '', spec.description, '');
    for (const a of spec.args ?? [])
      out.push(
        `- \`${a.required ? `<${a.name}>` : `[${a.name}]`}\`: ${a.summary}${a.choices ? ` (one of ${a.choices.join(', ')})` : ''}`,
      );
    if ((spec.args ?? []).length > 0) out.push('');
    out.push('| Option | Type | Description | Default | Environment |', '| --- | --- | --- | --- | --- |');
    for (const o of allOptions(spec)) {
      const details = optionDetails(o).filter((d) => !d.startsWith('default:') && !d.startsWith('env:'));
      const type = o.type === 'enum' ? `enum: ${(o.choices ?? []).join(', ')}` : o.type;
      const def =
        o.default === undefined || o.default === false || (Array.isArray(o.default) && o.default.length === 0)
          ? ''
          : `\`${Array.isArray(o.default) ? o.default.join(',') : String(o.default)}\``;
      out.push(
        `| \`${cell(flagsText(o))}\`${o.negatable ? `, \`--no-${o.name}\`` : ''} | ${cell(type)} | ${cell(o.summary)}${details.length > 0 ? ` (${cell(details.join('; '))})` : ''} | ${cell(def)} | ${o.env ? `\`${o.env}\`` : ''} |`,
      );
    }
    const examples = EXAMPLES[spec.name] ?? [];
    if (examples.length > 0)
      out.push(
        '',
        'Examples:',
        '',
        '```sh',
        examples.map(([what, line]) => `# ${what}\n${exampleLine(line)}`).join('\n\n'),
        '```',
      );
    out.push('', 'Exit codes:', '');
    for (const [code, meaning] of spec.exits) out.push(`- ${code}: ${meaning}`);
    out.push('- 64: usage error (an unknown or invalid flag or argument)', '');
  }
  return out.join('\n');
}
