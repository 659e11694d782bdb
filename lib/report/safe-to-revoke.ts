/**
 * The machine-readable answer to "may the old credential of this path be revoked?": `status --path P
 * --safe-to-revoke` (exit 0 only when safe) and serve's `GET /safe-to-revoke?path=P` (200 when safe, 409 when not).
 * One path, from the same status as the table and the page. Safe only when a route targets the path, every routed
 * consumer is current, rolled out and not halted, no pod of an older revision still runs, Vault (when asked)
 * answered and no rotation of the path is halted. A targeted consumer in a cluster that could not be read is a
 * consumer not yet safe (status's UNKNOWN line), so anything unknown is "not safe".
 */
import type { RotationHalt } from '../rotations/rotation-store.ts';
import type { FleetStatus } from '../status/fleet-status.ts';
import { consumerVerdict } from './status-report.ts';

/** At most this many consumers are named in `waitingFor`; `consumers` counts them all. */
const MAX_NAMED = 50;

export interface SafeToRevokeAnswer {
  path: string;
  safe: boolean;
  /** What current means (Vault's current version, or the newest recorded) and where it came from. */
  current: number | string | null;
  currentFrom: 'vault' | 'records' | 'none';
  /** Routed consumers, and how many are current, rolled out and with no older pod running. */
  consumers: number;
  ready: number;
  /** Pods counted by revision over every routed consumer whose pods could be counted. */
  pods: { onRecorded: number; older: number };
  /** Why not, in words: the consumers not yet safe (at most MAX_NAMED), halts, unread clusters, notes. */
  waitingFor: Array<{ cluster: string; workload: string; verdict: string; detail: string }>;
  reasons: string[];
}

/** The answer for one path (namespace-qualified, as status reports it) from a status and the store's halts. */
export function safeToRevoke(status: FleetStatus, halts: readonly RotationHalt[], path: string): SafeToRevokeAnswer {
  const wanted = path.replace(/^\/+/, '');
  const found = status.paths.find((p) => p.path === wanted);
  const routed = found?.consumers.filter((c) => c.routed) ?? [];
  const notReady = routed.filter((c) => !c.ok);
  const reasons: string[] = [];
  if (!found) reasons.push('no route targets this path in the clusters read, or no consumer records it');
  else if (routed.length === 0) reasons.push('no consumer found in the clusters read');
  if (notReady.length > 0) reasons.push(`${notReady.length} of ${routed.length} consumer(s) not yet safe`);
  const pathHalts = halts.filter((h) => h.secrets.some((s) => s === wanted || s.startsWith(`${wanted} `)));
  for (const h of pathHalts) reasons.push(`rotation ${h.rotation} halted at wave ${h.wave} of ${h.waves}: ${h.why}`);
  if (found && !found.ok && notReady.length === 0) reasons.push(...found.notes);
  for (const note of status.notes) if (note.includes('left out')) reasons.push(note);
  const pods = { onRecorded: 0, older: 0 };
  for (const c of routed) {
    pods.onRecorded += c.runningPods?.onRecorded ?? 0;
    pods.older += c.runningPods?.older ?? 0;
  }
  return {
    path: wanted,
    safe: reasons.length === 0 && found?.ok === true && routed.length > 0,
    current: found?.current ?? null,
    currentFrom: found?.currentFrom ?? 'none',
    consumers: routed.length,
    ready: routed.length - notReady.length,
    pods,
    waitingFor: notReady.slice(0, MAX_NAMED).map((c) => ({
      cluster: c.cluster,
      workload: `${c.namespace || '-'}/${c.kind}/${c.name}`,
      verdict: consumerVerdict(c),
      detail: c.detail.slice(0, 300),
    })),
    reasons,
  };
}
