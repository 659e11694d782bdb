/**
 * What `npm start` shows while it runs: one short line per change `serve` accepted and per workload it worked,
 * read from serve's structured log (Powertools JSON lines on its stdout), and one per ReplicaSet a Deployment
 * rolled out in a cluster. Pure: a line in, display lines out. Everything else serve logs (metrics, idle polls)
 * stays in its log file; the fields used here are paths, versions and workload names, never values or tokens.
 */

interface ServeLogLine {
  level?: string;
  message?: string;
  changes?: Array<{ path?: string; version?: number | null }>;
  targets?: number;
  rejected?: number;
  cluster?: string;
  results?: Array<{ namespace?: string; kind?: string; name?: string; outcome?: string; reason?: string }>;
  reason?: string;
  error?: string;
}

const MAX_SHOWN = 20;
const pad = (text: string, width: number): string => (text.length >= width ? text : text + ' '.repeat(width - text.length));

/** The display lines for one line of serve's stdout ([] for anything not worth showing). */
export function serveLogToLines(line: string): string[] {
  let entry: ServeLogLine;
  try {
    entry = JSON.parse(line) as ServeLogLine;
  } catch {
    return [];
  }
  if (typeof entry !== 'object' || entry === null || typeof entry.message !== 'string') return []; // EMF metrics and the like
  if (entry.message === 'accepted') {
    const changes = (entry.changes ?? []).slice(0, MAX_SHOWN);
    return changes.map((ch) => `change    ${ch.path ?? '?'}${ch.version === null || ch.version === undefined ? '' : ` v${ch.version}`} -> ${entry.targets ?? 0} target(s) planned`);
  }
  if (entry.message === 'rollout message done') {
    return (entry.results ?? []).slice(0, MAX_SHOWN).map((r) => {
      const why = r.reason ? ` (${r.reason})` : '';
      return `${pad(r.outcome ?? '?', 10)}${pad(entry.cluster ?? '?', 7)}${r.namespace ?? '?'}/${r.kind ?? '?'}/${r.name ?? '?'}${why}`;
    });
  }
  if (entry.level === 'WARN' || entry.level === 'ERROR') {
    const why = entry.reason ?? entry.error;
    return [`${pad(entry.level === 'WARN' ? 'warning' : 'error', 10)}serve: ${entry.message}${why ? ` (${why})` : ''}`];
  }
  return [];
}

/** The display line for a new ReplicaSet of a Deployment: the cluster's controller rolled the new pod template out. */
export function replicaSetLine(cluster: string, namespace: string, deployment: string, replicaSet: string): string {
  return `${pad('rollout', 10)}${pad(cluster, 7)}${namespace}/Deployment/${deployment}: new ReplicaSet ${replicaSet}`;
}
