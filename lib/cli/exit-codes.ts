/**
 * What each exit code of the CLI means, beside EXIT (io.ts): docs/reference/exit-codes.md is generated from this
 * table (`npm run docs:reference`), and its test fails when EXIT gains a code without a line here.
 */
import type { EXIT } from './io.ts';

export type ExitName = keyof typeof EXIT;

export const EXIT_CODE_MEANINGS: Readonly<Record<ExitName, { meaning: string; commands: string }>> = {
  ok: {
    meaning:
      'Done, and nothing failed: every record understood, every target restarted or unchanged, every consumer current (status), every sink reached (notify test).',
    commands: 'every command',
  },
  failure: {
    meaning:
      'A problem the command reports in words: a routing table that does not validate, unreadable input or files, problems found by `doctor` or `validate`, a cluster `import` cannot read, `status` not safe to revoke (some consumer behind, failed, halted or poisoned), a sink `notify test` could not reach, a path or workload `reconcile` could not read, a server that cannot start.',
    commands: 'every command',
  },
  rejectedRecords: {
    meaning:
      'Some input record could not be parsed; each is named on stderr and under `rejected`, and the rest was still planned (or applied).',
    commands: '`plan`, `apply`',
  },
  targetsFailed: {
    meaning: 'Some restart target failed (or was refused, for instance by a halt) after its retries.',
    commands: '`apply`, `reconcile`, `reset-version`',
  },
  rolloutsFailed: {
    meaning: 'A restart was accepted but its rollout failed or timed out, or a wave gate halted the rotation.',
    commands: '`apply --wait`, `reset-version`',
  },
  awaitingApproval: {
    meaning:
      'A wave waited for approval (`rollout.gate.approval`) longer than its gate timeout; the request stays in the rotation store: `vault-rollout approve` it, then run the same command again (the waves already done pass their gates at once).',
    commands: '`apply --wait`, `reset-version`',
  },
  usage: {
    meaning: 'Usage error: an unknown command or option, a missing or malformed argument (`EX_USAGE` of sysexits.h).',
    commands: 'every command',
  },
};
