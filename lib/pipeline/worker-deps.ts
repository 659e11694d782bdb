/**
 * What the worker is given (its dependencies) and what it answers for a batch; shared by the cluster and gate workers.
 */
import type { RolloutResult } from '../engine/types.ts';
import type { ExecutorSettings } from './kube-executor.ts';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import type { WaveTargetState } from '../plan/waves.ts';
import { type RolloutMessage, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import type { NotificationOutbox } from '../rotations/notification-outbox.ts';

export interface QueueRecord {
  messageId: string;
  body: string;
  groupId: string;
  /**
   * How many times the queue has delivered it (1 the first time); holds re-send a fresh copy before the redrive limit.
   */
  receiveCount?: number;
}

export interface WorkerDeps {
  table: RoutingTable;
  /** Released waves and halts (lib/rotations): checked before every restart, written by gates. */
  rotations: RotationStore;
  /**
   * Where a refused message goes, with its reason (the runtime's dead-letter queue). When it throws, the message is
   * redelivered instead (and reaches the dead letters through the queue's redrive policy). Without it (tests) a
   * refused message is acknowledged.
   */
  deadLetter?: (record: QueueRecord, reason: string) => Promise<void>;
  executor: ExecutorSettings;
  telemetry: Telemetry;
  /** Called for a cluster whose credentials were refused, so the next attempt resolves them again. */
  invalidate?: (cluster: string) => void;
  now?: () => number;
  /**
   * Follow each restart out of line: the step patches, takes one look, and hands what is still under
   * way (a rollout, an operator's sync, a slot to free) to a continuation — the same changes in a group of their
   * own, sent with `requeue` before the cluster's message is acknowledged — which looks again later until the
   * rollouts end (lib/plan/look-again.ts). Nothing waits in line; nothing restarts twice. Without it, a restart's
   * result is the patch alone.
   */
  follow?: { requeue: (message: RolloutMessage) => Promise<void> };
  /** Where gates queue the next wave and their own fresh copies; without it a gate is redelivered. */
  queue?: RolloutQueue;
  /**
   * Gates: how long to wait before the next look at a wave still rolling (default 10 s; a watch may wake it earlier).
   */
  gate?: { recheckMs?: number };
  /**
   * Called as soon as one group of the batch (a cluster, a gate) is worked, before the slower groups are: lets a
   * runtime hand that group's messages back at once (delete the worked ones, defer the held ones), so a batch of
   * several clusters never makes one wait for another. Must not throw.
   */
  onGroupDone?: (group: GroupOutcome) => Promise<void>;
  /**
   * Where a change outside its maintenance window goes when this worker does not wait for windows (`reconcile` worked
   * here, in the foreground): told here and acknowledged, restarted by a later run inside the window. Without it the
   * change waits for its window in the queue (lib/pipeline/window-wait.ts).
   */
  windowClosed?: (wait: { cluster: string; window: string; opensAt: string }) => void;
  /**
   * Rotation events are written here, once per event id (lib/pipeline/rotation-notices.ts); a loop elsewhere sends
   * them.
   */
  notifications?: { outbox: NotificationOutbox };
}

/** What became of one group's messages: the ids not in `failed` or `deferred` are done (worked or refused). */
export interface GroupOutcome {
  messageIds: string[];
  failed: string[];
  deferred: Deferred[];
}

/** A message handed back to be looked at again after `delayMs` (lib/pipeline/look-again.ts). */
export interface Deferred {
  messageId: string;
  delayMs: number;
  /** Workloads whose rollout it waits on: a long-lived runtime may end the hold when a watch sees one of them end. */
  watch?: WatchedWorkload[];
}

/** A workload a held message waits on, as a watch needs it (never a command: the message decides nothing by it). */
export interface WatchedWorkload {
  cluster: string;
  namespace: string;
  kind: string;
  name: string;
  restartToken: string;
}

/** Holds by visibility before a held message is re-sent fresh: with the first delivery, 3 of SQS's 5 receives. */
export const HOLDS_BEFORE_RESEND = 2;

/**
 * Whether the worker follows restarts (out of line, by continuations): VAULT_ROLLOUT_FOLLOW=off only patches
 * (results then carry no rollout state, gates see no health). VAULT_ROLLOUT_FOLLOW_SECONDS, the in-line budget of
 * earlier releases, is still read: 0 means off, any other number on (nothing follows in line any more).
 */
export function followFromEnv(env: Readonly<Record<string, string | undefined>>): boolean {
  const set = onOff(env, 'VAULT_ROLLOUT_FOLLOW');
  if (set !== undefined) return set;
  const legacy = env.VAULT_ROLLOUT_FOLLOW_SECONDS;
  if (legacy === undefined || legacy === '') return true;
  const seconds = Number(legacy);
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > 900)
    throw new Error(
      `VAULT_ROLLOUT_FOLLOW_SECONDS=${legacy.slice(0, 20)} must be a number of seconds from 0 to 900 (0: do not follow; prefer VAULT_ROLLOUT_FOLLOW=on|off)`,
    );
  return seconds > 0;
}

/**
 * Whether a long-lived `serve` or `worker` keeps watches open to wake a held continuation when its rollout ends
 * (lib/pipeline/rollout-waker.ts): VAULT_ROLLOUT_WATCH=off (default on) saves the watch connections, and each
 * rollout's end is then seen at the continuation's next look (at most 15 s later), as in Lambda.
 */
export function watchFromEnv(env: Readonly<Record<string, string | undefined>>): boolean {
  return onOff(env, 'VAULT_ROLLOUT_WATCH') ?? true;
}

function onOff(env: Readonly<Record<string, string | undefined>>, name: string): boolean | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (raw === 'on' || raw === 'true') return true;
  if (raw === 'off' || raw === 'false') return false;
  throw new Error(`${name}=${raw.slice(0, 20)} must be on or off`);
}

export interface BatchOutcome {
  /** Message ids to redeliver (SQS `batchItemFailures`). */
  failed: string[];
  /** Message ids refused (acknowledged, never executed), with the reason. */
  refused: Array<{ messageId: string; reason: string }>;
  results: RolloutResult[];
  /** Message ids to hand back to the queue for later (invisible for `delayMs`, then redelivered): every wait. */
  deferred: Deferred[];
  /** Rotations a wave's gate halted: which change, where, why. */
  halts: HaltRecord[];
}

export interface HaltRecord {
  /** The changes' paths and versions. */
  secrets: string[];
  /** 1-based wave that failed, and how many waves there are. */
  wave: number;
  waves: number;
  /** The workload that failed the gate. */
  failing: Pick<WaveTargetState, 'cluster' | 'namespace' | 'kind' | 'name' | 'state'>;
  why: string;
  /** Clusters of the later waves, never restarted for these changes. */
  notRestarted: string[];
}

export function refuse(deps: WorkerDeps, outcome: BatchOutcome, record: QueueRecord, reason: string): void {
  // Never executed, never redelivered: redelivery cannot make it acceptable, and a forged message must not
  // hold the real messages of its group behind it.
  deps.telemetry.error('refused rollout message', {
    messageId: record.messageId,
    group: record.groupId.slice(0, 63),
    reason,
  });
  deps.telemetry.metric(METRICS.refusedMessages, 1, 'Count');
  outcome.refused.push({ messageId: record.messageId, reason });
}
