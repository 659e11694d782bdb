/**
 * The CLI reference page (docs/reference/cli.md, written by `npm run docs:reference`). A placeholder: it shows
 * main.ts's USAGE as it is; the command-framework work replaces it with one section per command and flag.
 */
import { USAGE } from './main.ts';

export function cliReferenceMarkdown(): string {
  return ['# CLI reference', '', '`vault-rollout <command> [options]`: the commands and their options, as `vault-rollout --help` prints them.', '', '```text', USAGE.trimEnd(), '```', ''].join('\n');
}
