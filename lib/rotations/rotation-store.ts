/**
 * A rotation's durable state: how far its waves were released, and whether it halted. A rotation is one
 * change set (lib/plan/waves.ts `ChangeSet`), named by its key, the hash of its changes. Every path that restarts
 * reads it — the worker before it restarts anything in a later wave or for a halted change, reconcile before it
 * queues, `apply` before it patches — and only a gate that passed (release) or failed (halt) writes it. So a halt
 * holds against a reconcile run, a forged queue message, a relay with an older table and `apply` alike, until an
 * operator clears it (`vault-rollout halts clear`).
 *
 * Stores: DynamoDB in Lambda (`VAULT_ROLLOUT_STATE_TABLE`), SQLite for `serve`, `worker` and the CLI (serve's queue
 * file by default, or `VAULT_ROLLOUT_STATE_DB`), memory in tests.
 */
import { createHash } from 'node:crypto';
import type { WorkloadRef } from '../workloads/workload-ref.ts';
import { decideBreaker, type BreakerEntry, type BreakerLimit, type BreakerVerdict } from '../plan/restart-breaker.ts';
import { MemoryApprovalStore, type ApprovalStore } from './approvals.ts';
import { MemoryKeyBaselineStore } from './key-baselines.ts';

export interface RotationHalt {
  /** The change set's key: the same changes give the same key in the intake, the worker, reconcile and `apply`. */
  rotation: string;
  route: string;
  /** The identities of the rotation's changes (path, version, operation): what a later message is checked against. */
  changes: string[];
  /** The changes as people read them: `secret/app/db version 2`. */
  secrets: string[];
  /** 1-based wave that failed, and how many waves there are. */
  wave: number;
  waves: number;
  failing: WorkloadRef & { state: string };
  why: string;
  /** Clusters of the later waves, never restarted for these changes. */
  notRestarted: string[];
  /** ISO time of the halt. */
  haltedAt: string;
}

/**
 * When a wave of a rotation started (its first restart, or the gate's release of it) and when a gate first saw it
 * complete (ISO times). The gate's timeout and pause count from these, never from a message: a queue sender could
 * write any time into a message.
 */
export interface WaveTimes {
  startedAt?: string;
  completeAt?: string;
}

export type WaveMark = keyof WaveTimes;
/** Who cleared a halt, from where and when (`vault-rollout halts clear`): the trail a clear leaves. */
export interface ClearedBy {
  /** The operating-system user that ran `halts clear`. */
  user: string;
  host: string;
  /** ISO time of the clear. */
  clearedAt: string;
}

/** A cleared halt, kept in the store after the halt itself is gone: what was halted, and who cleared it. */
export interface HaltClearance extends ClearedBy {
  rotation: string;
  secrets: string[];
  wave: number;
  waves: number;
  failing: RotationHalt['failing'];
  why: string;
}

/** A bound on the clearances `clearances()` returns, newest first. */
export const MAX_LISTED_CLEARANCES = 100;

export const clearanceOf = (halt: RotationHalt, by: ClearedBy): HaltClearance => ({
  rotation: halt.rotation,
  secrets: halt.secrets,
  wave: halt.wave,
  waves: halt.waves,
  failing: halt.failing,
  why: halt.why,
  user: by.user,
  host: by.host,
  clearedAt: by.clearedAt,
});

export interface RotationStore {
  /** The highest wave index a passed gate released for this rotation (0: only the first wave may restart). */
  releasedWave(rotation: string): Promise<number>;
  /** Records that a gate passed and released `wave`: never lowers what was released. */
  releaseWave(rotation: string, wave: number): Promise<void>;
  /**
   * Records a time of a wave unless the store holds one already (a conditional put: the first worker to see it
   * wins, a later or forged one changes nothing). Returns the times the store holds afterwards.
   */
  markWave(rotation: string, wave: number, mark: WaveMark, at: string): Promise<WaveTimes>;
  /** What markWave recorded for the wave (nothing: the wave has not started as far as the store knows). */
  waveTimes(rotation: string, wave: number): Promise<WaveTimes>;
  /** Forgets a wave's times once its gate passed it, so a later run of the same rotation (reconcile) times afresh. */
  forgetWave(rotation: string, wave: number): Promise<void>;
  halt(halt: RotationHalt): Promise<void>;
  /** The halts that name any of these change identities. */
  haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]>;
  /** Every halt, oldest first (at most `MAX_LISTED_HALTS`). */
  halts(): Promise<RotationHalt[]>;
  /**
   * Clears a halt, the rotation's released waves and its wave times (the next change or reconcile starts it again from
   * wave 1); with `by`, keeps who cleared it (a HaltClearance) before the halt goes, so no clear leaves no trail.
   */
  clear(rotation: string, by?: ClearedBy): Promise<RotationHalt | undefined>;
  /** The latest clearances, newest first (at most MAX_LISTED_CLEARANCES). */
  clearances?(): Promise<HaltClearance[]>;
  /**
   * `rollout.breaker`: counts this restart (by its token) of the workload (`breakerKey`) unless it would be one too
   * many, in one conditional write (lib/plan/restart-breaker.ts decides).
   */
  admitRestart?(workload: string, token: string, now: number, limit: BreakerLimit): Promise<BreakerVerdict>;
  /** Forgets the workload's counted restarts: `halts clear` of a breaker's halt. */
  resetRestarts?(workload: string): Promise<void>;
  /** Waves waiting for `vault-rollout approve`, and the approvals (lib/rotations/approvals.ts). */
  readonly approvals?: ApprovalStore;
  close?(): void;
}

/** A bound on what `halts()` returns: a fleet with more halts than this has a bigger problem to show. */
export const MAX_LISTED_HALTS = 1000;

/** A fixed-length key for a change identity (identities carry paths up to 1 KiB). */
export const identityKey = (identity: string): string =>
  createHash('sha256').update(identity).digest('hex').slice(0, 40);

/**
 * Tests and dry runs: one process's memory. Never used where a halt must outlive the process. Also the key baselines.
 */
export class MemoryRotationStore extends MemoryKeyBaselineStore implements RotationStore {
  readonly #released = new Map<string, number>();
  readonly #halts = new Map<string, RotationHalt>();
  readonly #times = new Map<string, WaveTimes>();
  readonly #clearances: HaltClearance[] = [];
  readonly approvals = new MemoryApprovalStore();

  readonly #restarts = new Map<string, BreakerEntry[]>();

  admitRestart(workload: string, token: string, now: number, limit: BreakerLimit): Promise<BreakerVerdict> {
    const { verdict, history } = decideBreaker(this.#restarts.get(workload) ?? [], token, now, limit);
    this.#restarts.set(workload, history);
    return Promise.resolve(verdict);
  }

  resetRestarts(workload: string): Promise<void> {
    this.#restarts.delete(workload);
    return Promise.resolve();
  }

  releasedWave(rotation: string): Promise<number> {
    return Promise.resolve(this.#released.get(rotation) ?? 0);
  }

  releaseWave(rotation: string, wave: number): Promise<void> {
    this.#released.set(rotation, Math.max(wave, this.#released.get(rotation) ?? 0));
    return Promise.resolve();
  }

  markWave(rotation: string, wave: number, mark: WaveMark, at: string): Promise<WaveTimes> {
    const times = { ...this.#times.get(waveTimesKey(rotation, wave)) };
    times[mark] ??= at;
    this.#times.set(waveTimesKey(rotation, wave), times);
    return Promise.resolve({ ...times });
  }

  waveTimes(rotation: string, wave: number): Promise<WaveTimes> {
    return Promise.resolve({ ...this.#times.get(waveTimesKey(rotation, wave)) });
  }

  forgetWave(rotation: string, wave: number): Promise<void> {
    this.#times.delete(waveTimesKey(rotation, wave));
    return Promise.resolve();
  }

  halt(halt: RotationHalt): Promise<void> {
    this.#halts.set(halt.rotation, structuredClone(halt));
    return Promise.resolve();
  }

  haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]> {
    const wanted = new Set(changeIdentities);
    return Promise.resolve(
      [...this.#halts.values()].filter((h) => h.changes.some((c) => wanted.has(c))).map((h) => structuredClone(h)),
    );
  }

  halts(): Promise<RotationHalt[]> {
    return Promise.resolve(
      [...this.#halts.values()]
        .sort((a, b) => a.haltedAt.localeCompare(b.haltedAt))
        .slice(0, MAX_LISTED_HALTS)
        .map((h) => structuredClone(h)),
    );
  }

  clear(rotation: string, by?: ClearedBy): Promise<RotationHalt | undefined> {
    const halt = this.#halts.get(rotation);
    if (halt && by) this.#clearances.unshift(clearanceOf(halt, by));
    this.#halts.delete(rotation);
    this.#released.delete(rotation);
    for (const key of [...this.#times.keys()]) if (key.startsWith(`${rotation}\u0000`)) this.#times.delete(key);
    void this.approvals.forget(rotation);
    return Promise.resolve(halt);
  }

  clearances(): Promise<HaltClearance[]> {
    return Promise.resolve(structuredClone(this.#clearances.slice(0, MAX_LISTED_CLEARANCES)));
  }

  close(): void {
    // Nothing to release.
  }
}

const waveTimesKey = (rotation: string, wave: number): string => `${rotation}\u0000${wave}`;

/** Reads a stored halt back; a record that is not one (a hand-edited table) is skipped, never trusted half-way. */
export function parseStoredHalt(text: string): RotationHalt | undefined {
  try {
    const v = JSON.parse(text) as Partial<RotationHalt>;
    if (
      typeof v.rotation !== 'string' ||
      !Array.isArray(v.changes) ||
      !Array.isArray(v.secrets) ||
      typeof v.wave !== 'number' ||
      typeof v.waves !== 'number' ||
      typeof v.why !== 'string' ||
      typeof v.haltedAt !== 'string' ||
      typeof v.failing !== 'object' ||
      v.failing === null
    )
      return undefined;
    return { route: '', notRestarted: [], ...v } as RotationHalt;
  } catch {
    return undefined;
  }
}

/** Reads a stored clearance back; anything else is skipped. */
export function parseStoredClearance(text: string): HaltClearance | undefined {
  try {
    const v = JSON.parse(text) as Partial<HaltClearance>;
    const strings = [v.rotation, v.user, v.host, v.clearedAt, v.why].every((x) => typeof x === 'string');
    const numbers = typeof v.wave === 'number' && typeof v.waves === 'number';
    if (!strings || !numbers || !Array.isArray(v.secrets) || typeof v.failing !== 'object' || v.failing === null)
      return undefined;
    return v as HaltClearance;
  } catch {
    return undefined;
  }
}
