/**
 * The live view of `apply --wait`: one line per workload, redrawn in place on a terminal (like `kubectl rollout
 * status`, not a log flood); without a terminal, one plain line whenever a workload's state changes.
 */
import type { RolloutResult } from '../engine/types.ts';
import { table } from './table.ts';

/** At most this many lines are redrawn; the rest are summed up in one line. */
const MAX_LINES = 40;

export const resultKey = (r: Pick<RolloutResult, 'cluster' | 'namespace' | 'kind' | 'name'>): string =>
  `${r.cluster}/${r.namespace}/${r.kind}/${r.name}`;

const podsText = (r: RolloutResult): string => (r.pods ? `${r.pods.ready}/${r.pods.desired}` : '-');
const stateText = (r: RolloutResult): string =>
  r.rollout ?? (r.outcome === 'restarted' || r.outcome === 'unchanged' ? 'waiting' : '-');

/** The frame: a small table, the unfinished first. */
export function progressFrame(results: readonly RolloutResult[], elapsedMs: number): string {
  const order = (r: RolloutResult) => (r.rollout === undefined || r.rollout === 'progressing' ? 0 : 1);
  const sorted = [...results].sort((a, b) => order(a) - order(b) || (resultKey(a) < resultKey(b) ? -1 : 1));
  const shown = sorted.slice(0, MAX_LINES);
  const rows = shown.map((r) => [
    r.cluster,
    `${r.namespace || '-'}/${r.kind}/${r.name}`,
    r.outcome,
    stateText(r),
    podsText(r),
    (r.rolloutReason ?? r.reason).slice(0, 100),
  ]);
  const busy = results.filter((r) => order(r) === 0 && (r.outcome === 'restarted' || r.outcome === 'unchanged')).length;
  const lines = [
    `Waiting for rollouts: ${busy} of ${results.length} in progress, ${Math.round(elapsedMs / 1000)} s`,
    table(['CLUSTER', 'WORKLOAD', 'OUTCOME', 'ROLLOUT', 'READY', 'DETAIL'], rows),
  ];
  if (sorted.length > shown.length) lines.push(`  ... and ${sorted.length - shown.length} more`);
  return `${lines.join('\n')}\n`;
}

/** A one-line change for logs: `alpha ns/Deployment/api: progressing 1/3 (1 of 3 new pods created)`. */
export function progressLine(r: RolloutResult): string {
  return `${r.cluster} ${r.namespace || '-'}/${r.kind}/${r.name}: ${r.outcome}${r.rollout ? ` ${r.rollout}` : ''}${r.pods ? ` ${podsText(r)}` : ''}${r.rolloutReason ? ` (${r.rolloutReason})` : ''}\n`;
}

export interface ProgressView {
  update(result: RolloutResult): void;
  /** Removes the live frame (the final table follows). */
  close(): void;
}

/** On a terminal: redraws the frame in place at most every `intervalMs`. Otherwise: a line per state change. */
export function progressView(
  write: (text: string) => void,
  terminal: boolean,
  now: () => number = Date.now,
  intervalMs = 200,
): ProgressView {
  const results = new Map<string, RolloutResult>();
  const started = now();
  if (!terminal) {
    const said = new Map<string, string>();
    return {
      update(r) {
        const key = resultKey(r);
        const state = `${r.outcome}|${r.rollout ?? ''}|${r.pods ? podsText(r) : ''}`;
        if (said.get(key) === state) return;
        said.set(key, state);
        write(progressLine(r));
      },
      close() {},
    };
  }
  let drawn = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const draw = () => {
    timer = undefined;
    const frame = progressFrame([...results.values()], now() - started);
    // Up to the first line of the last frame, clear to the end of the screen, draw the new one.
    write(`${drawn > 0 ? `\x1b[${drawn}A\r\x1b[J` : ''}${frame}`);
    drawn = frame.split('\n').length - 1;
  };
  const tick = setInterval(() => timer ?? draw(), 1000);
  tick.unref?.();
  return {
    update(r) {
      results.set(resultKey(r), r);
      timer ??= setTimeout(draw, intervalMs);
    },
    close() {
      clearInterval(tick);
      if (timer) clearTimeout(timer);
      if (drawn > 0) write(`\x1b[${drawn}A\r\x1b[J`);
      drawn = 0;
    },
  };
}
