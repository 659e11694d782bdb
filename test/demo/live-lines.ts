/**
 * What `npm start` shows while it runs: one short line per change `serve` accepted, per workload it restarted, and
 * per rollout that ended, with the time since the change, read from serve's structured log (Powertools JSON lines on
 * its stdout) and from the clusters' new ReplicaSets. No I/O: lines in, display lines out. Everything else serve logs
 * (metrics, idle polls) stays in its log file; the fields used here are paths, versions and workload names, never
 * values or tokens.
 *
 * One restart is one line. serve reports a workload in the message that restarted it, again in each continuation
 * that looks at its rollout, and again if a message is redelivered; the cluster's watch sees the Deployment's new
 * ReplicaSet too. The view remembers what it showed, so each restart and each rollout's end appear once.
 */

interface ServeResult {
  namespace?: string;
  kind?: string;
  name?: string;
  outcome?: string;
  reason?: string;
  rollout?: string;
  rolloutReason?: string;
}

interface ServeLogLine {
  level?: string;
  message?: string;
  timestamp?: string;
  changes?: Array<{ path?: string; version?: number | null }>;
  targets?: number;
  cluster?: string;
  results?: ServeResult[];
  reason?: string;
  error?: string;
}

const MAX_SHOWN = 20;
/** A workload's restart is forgotten after this long without its rollout's end (bounds the memory of a long run). */
const FORGET_MS = 30 * 60_000;
const pad = (text: string, width: number): string => text.padEnd(width);
const row = (word: string, cluster: string, workload: string): string =>
  `${pad(word, 10)}${pad(cluster, 7)}${workload}`;
const plural = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;
const ENDS = new Set(['complete', 'failed', 'timeout']);

/** 8.2 s, 1 min 5 s: the time since the change, as a person reads it. */
export function sinceText(ms: number): string {
  if (ms < 60_000) return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

function parse(line: string): ServeLogLine | undefined {
  try {
    const entry = JSON.parse(line) as unknown;
    const isLog = typeof entry === 'object' && entry !== null && typeof (entry as ServeLogLine).message === 'string';
    return isLog ? (entry as ServeLogLine) : undefined;
  } catch {
    return undefined;
  }
}

/** What the view remembers of a workload it showed restarted: when the change it restarted for was accepted. */
interface Shown {
  changeAt: number;
  shownAt: number;
}

/** The live view of one `npm start`: feed it serve's stdout lines and the new ReplicaSets, print what it returns. */
export class LiveView {
  private lastChangeAt: number | undefined;
  private readonly restarted = new Map<string, Shown>();

  /** The display lines for one line of serve's stdout ([] for anything not worth showing, or already shown). */
  serveLine(line: string, nowMs: number): string[] {
    const entry = parse(line);
    if (entry === undefined) return []; // EMF metrics, text, the like
    const at = entry.timestamp === undefined ? nowMs : Date.parse(entry.timestamp) || nowMs;
    if (entry.message === 'accepted') {
      const changes = (entry.changes ?? []).slice(0, MAX_SHOWN);
      if (changes.length > 0) this.lastChangeAt = at;
      const planned = `${plural(entry.targets ?? 0, 'target')} planned`;
      const version = (v: number | null | undefined): string => (v === null || v === undefined ? '' : ` v${v}`);
      return changes.map((ch) => `change    ${ch.path ?? '?'}${version(ch.version)} -> ${planned}`);
    }
    if (entry.message === 'rollout message done' || entry.message === 'continuation looked') {
      return (entry.results ?? []).slice(0, MAX_SHOWN).flatMap((r) => this.result(entry.cluster ?? '?', r, at));
    }
    if (entry.level === 'WARN' || entry.level === 'ERROR') {
      const why = entry.reason ?? entry.error;
      const word = entry.level === 'WARN' ? 'warning' : 'error';
      return [`${pad(word, 10)}serve: ${entry.message}${why ? ` (${why})` : ''}`];
    }
    return [];
  }

  /** A new ReplicaSet of a Deployment: the restart, unless serve already said so. */
  replicaSet(cluster: string, namespace: string, deployment: string, replicaSet: string, nowMs: number): string[] {
    const key = `${cluster} ${namespace}/Deployment/${deployment}`;
    if (!this.firstRestart(key, nowMs)) return [];
    return [row('restarted', cluster, `${namespace}/Deployment/${deployment} (new ReplicaSet ${replicaSet})`)];
  }

  private result(cluster: string, r: ServeResult, at: number): string[] {
    const workload = `${r.namespace ?? '?'}/${r.kind ?? '?'}/${r.name ?? '?'}`;
    const key = `${cluster} ${workload}`;
    const lines: string[] = [];
    if (r.outcome === 'restarted') {
      if (this.firstRestart(key, at)) lines.push(row('restarted', cluster, workload));
    } else if (r.outcome !== undefined && r.outcome !== 'unchanged') {
      lines.push(row(r.outcome, cluster, `${workload}${r.reason ? ` (${r.reason})` : ''}`));
    }
    const shown = this.restarted.get(key);
    if (r.rollout !== undefined && ENDS.has(r.rollout) && shown !== undefined) {
      // The rollout's end, once: the restart is forgotten, so the next change's restart shows again.
      this.restarted.delete(key);
      const why = r.rollout === 'complete' || !r.rolloutReason ? '' : ` (${r.rolloutReason})`;
      lines.push(row(r.rollout, cluster, `${workload}${why}, ${sinceText(at - shown.changeAt)} after the change`));
    }
    return lines;
  }

  /** True the first time a workload's restart is reported (by serve or by its new ReplicaSet). */
  private firstRestart(key: string, nowMs: number): boolean {
    for (const [k, shown] of this.restarted) if (nowMs - shown.shownAt > FORGET_MS) this.restarted.delete(k);
    if (this.restarted.has(key)) return false;
    this.restarted.set(key, { changeAt: this.lastChangeAt ?? nowMs, shownAt: nowMs });
    return true;
  }
}
