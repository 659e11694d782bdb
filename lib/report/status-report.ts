/**
 * `vault-rollout status` output: per path, what current means and where it comes from, then a row per consumer.
 * What needs a look stands out in capitals (BEHIND, FAILED, TIMEOUT, HALTED, POISONED, UNKNOWN); no colours, so it
 * pastes into a ticket as it is. Everything printed goes through `printable`: record keys and values, Event
 * messages and conditions come from objects tenants write, and a control character would rewrite the terminal.
 */
import type { ConsumerStatus, FleetStatus, PathStatus } from '../status/fleet-status.ts';
import { printable, printableJson } from './printable.ts';
import { table } from './table.ts';

const MAX_ROWS_PER_PATH = 200;

const currentText = (p: PathStatus): string => {
  if (p.currentFrom === 'vault' && p.vault && 'currentVersion' in p.vault)
    return `Vault current_version ${p.vault.currentVersion}${p.vault.createdTime ? ` (written ${p.vault.createdTime.replace(/\.\d+Z$/, 'Z')})` : ''}`;
  if (p.currentFrom === 'records') return `newest recorded ${JSON.stringify(p.current)} (Vault not read)`;
  return 'no version known';
};

/** The one word that says what is wrong, in capitals, or what is fine, in lower case. */
export function consumerVerdict(c: ConsumerStatus): string {
  if (c.state === 'poisoned') return 'POISONED';
  if (c.state === 'unknown') return 'UNKNOWN';
  if (c.halted !== undefined) return 'HALTED';
  if (c.skippedByKeys !== undefined) return 'skipped by keys (unverified)';
  if (c.state === 'behind') return c.notifyOnly ? 'BEHIND (notify-only)' : 'BEHIND';
  if (c.rollout === 'failed') return 'FAILED';
  if (c.rollout === 'timeout') return 'TIMEOUT';
  if (c.rollout === 'progressing') return 'rolling';
  if (c.runningPods?.unread !== undefined) return 'PODS UNREAD';
  if ((c.runningPods?.older ?? 0) > 0) return 'OLD PODS';
  return c.routed ? 'current' : 'current (not routed)';
}

const podsText = (c: ConsumerStatus): string => (c.pods ? `${c.pods.updated}/${c.pods.desired}` : '-');

/** The running pods on the recorded version / on an older one (`?` when they could not be counted). */
export const runningPodsText = (c: ConsumerStatus): string =>
  c.runningPods === undefined
    ? '-'
    : c.runningPods.unread !== undefined
      ? '?'
      : `${c.runningPods.onRecorded}/${c.runningPods.older}`;

function rows(p: PathStatus): string[][] {
  return p.consumers
    .slice(0, MAX_ROWS_PER_PATH)
    .map((c) =>
      [
        c.cluster,
        `${c.namespace || '-'}/${c.kind}/${c.name}`,
        c.recorded === null ? '-' : String(c.recorded),
        consumerVerdict(c),
        c.rollout,
        podsText(c),
        runningPodsText(c),
        c.ok ? '' : c.detail.slice(0, 160),
      ].map(printable),
    );
}

export function summaryCounts(s: FleetStatus): Record<string, number> {
  const all = s.paths.flatMap((p) => p.consumers.filter((c) => c.routed));
  const count = (f: (c: ConsumerStatus) => boolean) => all.filter(f).length;
  return {
    paths: s.paths.length,
    consumers: all.length,
    ok: count((c) => c.ok),
    behind: count((c) => c.state === 'behind'),
    rolling: count((c) => c.state === 'current' && c.rollout === 'progressing' && c.halted === undefined),
    'old pods': count((c) => ['OLD PODS', 'PODS UNREAD'].includes(consumerVerdict(c))),
    failed: count((c) => c.rollout === 'failed' || c.rollout === 'timeout'),
    halted: count((c) => c.halted !== undefined),
    poisoned: count((c) => c.state === 'poisoned'),
    unknown: count((c) => c.state === 'unknown'),
  };
}

/** The clusters status could not read (a cluster once however many of its lists failed), sorted. */
export const unreadableClusters = (s: FleetStatus): string[] => [...new Set(s.unreadable.map((u) => u.cluster))].sort();

/** `cannot read alpha` / `cannot read 2 clusters: alpha, beta`: what status could not see, for a verdict or a title. */
export function unreadableText(s: FleetStatus): string {
  const names = unreadableClusters(s);
  if (names.length === 1) return `cannot read cluster ${names[0] as string}`;
  return `cannot read ${names.length} clusters: ${names.join(', ')}`;
}

export function summaryLine(s: FleetStatus): string {
  const n = summaryCounts(s);
  const parts = [`${n.paths} path(s), ${n.consumers} consumer(s): ${n.ok} current and complete`];
  for (const k of ['behind', 'rolling', 'old pods', 'failed', 'halted', 'poisoned', 'unknown'] as const)
    if ((n[k] ?? 0) > 0) parts.push(`${n[k]} ${k}`);
  if (s.unreadable.length > 0) parts.push(`${s.unreadable.length} unreadable list(s)`);
  // What could not be read is named first: it is why the verdict cannot be yes, and what to fix.
  const notYet =
    s.unreadable.length > 0
      ? `Not yet: ${unreadableText(s)}, so what runs there is not known.`
      : 'Not yet: some consumer is not on the current version, not rolled out, or still runs older pods.';
  return `${parts.join(', ')}. ${s.ok ? 'Every consumer runs the current version: the old credential may be revoked.' : notYet}`;
}

export function statusText(s: FleetStatus): string {
  const out: string[] = [];
  for (const p of s.paths) {
    out.push(printable(`${p.path}  ${currentText(p)}${p.kvVersion === 1 ? '  [KV v1]' : ''}`));
    if (p.consumers.length === 0) out.push('  no consumer found in the clusters read');
    else
      out.push(
        table(['CLUSTER', 'WORKLOAD', 'RECORDED', 'STATE', 'ROLLOUT', 'NEW PODS', 'ON REC/OLD', 'DETAIL'], rows(p)),
      );
    if (p.consumers.length > MAX_ROWS_PER_PATH)
      out.push(`  ... and ${p.consumers.length - MAX_ROWS_PER_PATH} more (use --json for all)`);
    for (const note of p.notes) out.push(`  note: ${printable(note)}`);
    out.push('');
  }
  if (s.paths.length === 0 && s.unreadable.length > 0) {
    out.push(printable(`No routed path could be read: ${unreadableText(s)}.`), '');
  } else if (s.paths.length === 0)
    out.push('No routed path is recorded in the clusters read (and --path named none).', '');
  for (const u of s.unreadable) out.push(printable(`cannot read ${u.cluster}: ${u.error}`));
  for (const note of s.notes) out.push(`note: ${printable(note)}`);
  out.push(summaryLine(s));
  return `${out.join('\n')}\n`;
}

/** `--json`: statusJson as text, every control character escaped (printableJson), so it too prints safely. */
export const statusJsonText = (s: FleetStatus): string => `${printableJson(statusJson(s), 2)}\n`;

export function statusJson(s: FleetStatus): Record<string, unknown> {
  return {
    ok: s.ok,
    summary: summaryCounts(s),
    paths: s.paths.map((p) => ({ ...p, consumers: p.consumers.map((c) => ({ ...c, verdict: consumerVerdict(c) })) })),
    unreadable: s.unreadable,
    notes: s.notes,
  };
}

/** One plain line per consumer whose verdict changed, for `--wait` without a terminal. */
export function statusLines(s: FleetStatus, said: Map<string, string>): string {
  const lines: string[] = [];
  for (const p of s.paths) {
    for (const c of p.consumers) {
      const key = `${p.path}|${c.cluster}/${c.namespace}/${c.kind}/${c.name}`;
      const text = `${consumerVerdict(c)} ${c.rollout} ${podsText(c)} ${c.recorded ?? '-'}`;
      if (said.get(key) === text) continue;
      said.set(key, text);
      lines.push(
        printable(
          `${p.path} ${c.cluster} ${c.namespace || '-'}/${c.kind}/${c.name}: ${consumerVerdict(c)}, recorded ${c.recorded ?? '-'}, ${c.rollout} ${podsText(c)}${c.ok ? '' : ` (${c.detail.slice(0, 120)})`}`,
        ),
      );
    }
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}
