/**
 * A gate's look at its wave: the wave's times from the rotation store, then where each of its rollouts stands now,
 * with what the gate's next step needs (lib/pipeline/gate-worker.ts decides from it).
 */
import type { RolloutResult } from '../engine/types.ts';
import type { RolloutTarget } from '../plan/planner.ts';
import { targetWave } from '../plan/target-waves.ts';
import type { ChangeSet, Wave } from '../plan/waves.ts';
import type { GateMessage } from '../queue/rollout-message.ts';
import type { WaveTimes } from '../rotations/rotation-store.ts';
import { executeRollouts } from './kube-executor.ts';
import type { BatchOutcome, QueueRecord, WorkerDeps } from './worker-deps.ts';

/**
 * One look at the gate's wave: its times from the rotation store, then where each rollout stands now (never a wait
 * in line). A boolean instead is the gate's answer without a look: true for a wave with no next one, false
 * (redeliver) when the times could not be read.
 */
export async function lookAtWave(
  record: QueueRecord,
  message: GateMessage,
  deps: WorkerDeps,
  outcome: BatchOutcome,
  set: ChangeSet,
  targets: RolloutTarget[],
): Promise<Gate | boolean> {
  const now = deps.now ?? Date.now;
  const wave = set.waves[message.wave];
  const next = set.waves[message.wave + 1];
  if (!wave || !next) return true;
  // A wave that selects targets is only those of its clusters' targets (servers before their clients).
  const waveTargets = targets.filter((t) => targetWave(set.waves, t) === message.wave);
  // The wave's clock is the rotation store's, written by the workers that saw the wave start and complete; a
  // gate message's own times (a forger's `since: 1970`) are never read.
  let times: WaveTimes;
  try {
    times = await deps.rotations.waveTimes(set.key, message.wave);
  } catch (e) {
    deps.telemetry.warn("could not read the wave's times; the gate will be redelivered", {
      messageId: record.messageId,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  const since = times.startedAt === undefined ? undefined : Date.parse(times.startedAt);
  const results = await executeRollouts(deps.table, waveTargets, {
    ...deps.executor,
    observeOnly: true,
    follow: { budgetMs: 0, once: true, since: since ?? now() },
  });
  const secrets = secretsOf(targets);
  const fields = {
    messageId: record.messageId,
    route: set.route,
    secrets,
    wave: message.wave + 1,
    waves: set.waves.length,
    clusters: wave.clusters,
  };
  return {
    record,
    message,
    deps,
    outcome,
    set,
    next,
    waveTargets,
    results,
    secrets,
    fields,
    now,
    since,
    completeAt: times.completeAt,
  };
}

/** One gate's look at its wave, shared by what it decides next. */
export interface Gate {
  record: QueueRecord;
  message: GateMessage;
  deps: WorkerDeps;
  outcome: BatchOutcome;
  set: ChangeSet;
  /** The wave this gate releases. */
  next: Wave;
  waveTargets: RolloutTarget[];
  results: RolloutResult[];
  /** The rotation's secrets as `path version N`, for logs, the halt and its Event. */
  secrets: string[];
  fields: Record<string, unknown>;
  now: () => number;
  /** When the wave started and was first seen complete, by the rotation store. */
  since: number | undefined;
  completeAt: string | undefined;
}

/** The rotation's secrets as `path version N` (or `path (operation)`), once each, sorted. */
function secretsOf(targets: readonly RolloutTarget[]): string[] {
  return [
    ...new Set(
      targets.flatMap((t) =>
        t.secrets.map((s) => (s.version === null ? `${s.path} (${s.operation})` : `${s.path} version ${s.version}`)),
      ),
    ),
  ].sort();
}
