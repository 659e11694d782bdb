/**
 * One LIST + WATCH for one (cluster, namespace, kind), shared by every rollout followed there, with what it has seen
 * of each object's health (bounded by the objects of that kind in the namespace), so a member that joins later is
 * answered from it at once and then by the events that follow. A single workload is watched by name until a second
 * one joins; from then on the whole namespace. 410 Gone relists, a denied watch falls back to a LIST every few
 * seconds, other errors reconnect with backoff. The public face is rollout-follower.ts.
 */
import { ApiException } from '@kubernetes/client-node';
import { backoffDelayMs } from '../kernel/backoff.ts';
import { ANNOTATIONS } from '../plan/restart-record.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import type { Health, RolloutState } from '../workloads/rollout-health.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import { describeRollout, type FollowedRollout, type FollowOptions, type FollowTarget } from './follow-model.ts';

/** How long a rollout already past its deadline waits for its first status read before it is called timeout. */
const PAST_DEADLINE_GRACE_MS = 5_000;

/** 250 ms doubling to 5 s, jittered; a flapping cluster costs a request every few seconds at most. */
const backoff = (failures: number): number => backoffDelayMs(failures, 250, 5_000);

interface Member {
  target: FollowTarget;
  /** Join order in its group: a LIST sent after the join proves the workload gone when it is missing. */
  seq: number;
  last?: Health;
  lastError?: string;
  done?: FollowedRollout;
  answer(done: FollowedRollout): void;
  timer?: ReturnType<typeof setTimeout>;
}

/** What the group's LIST and WATCH last said about one object of its kind (the health, not the object). */
type Seen =
  | { deleted: false; uid?: string; generation: number; token?: string; health: Health }
  | { deleted: true; uid?: string };

/**
 * The newest of the members' versions, so one look sees every member's restart: etcd's revisions are 64-bit
 * integers and the API server hands them out as such. Any version that is not one (another storage), or a member
 * without one,
 * leaves the look a consistent read.
 */
export function newestVersion(versions: ReadonlyArray<string | undefined>): string | undefined {
  let newest: bigint | undefined;
  for (const v of versions) {
    if (v === undefined || !/^[1-9][0-9]{0,18}$/.test(v)) return undefined;
    const n = BigInt(v);
    if (newest === undefined || n > newest) newest = n;
  }
  return newest?.toString();
}

/** A member's answer when nothing more will be read: its last health and error, in the state given. */
function lastWord(m: Member, state: RolloutState, now: number): FollowedRollout {
  const message = describeRollout(state, m.last, now - m.target.startedAt, m.lastError);
  return { rollout: state, ...(m.last?.pods ? { pods: m.last.pods } : {}), message };
}

export class SharedWatch {
  readonly #first: FollowTarget;
  readonly #options: FollowOptions;
  readonly #clock: { now(): number };
  readonly #budgetEnd: number;
  readonly #isSealed: () => boolean;
  /** Members still without an answer, by workload name. */
  readonly #byName = new Map<string, Member[]>();
  readonly #stop = new AbortController();
  #known = new Map<string, Seen>();
  #listed = false;
  #several = false;
  #selector: string | undefined;
  #request: AbortController | undefined;
  #relist = false;
  #pending = 0;
  #joins = 0;
  #failures = 0;
  #poll = false;
  #wake: (() => void) | undefined;

  constructor(
    first: FollowTarget,
    options: FollowOptions,
    clock: { now(): number },
    budgetEnd: number,
    isSealed: () => boolean,
  ) {
    this.#first = first;
    this.#options = options;
    this.#clock = clock;
    this.#budgetEnd = budgetEnd;
    this.#isSealed = isSealed;
    // Started once the caller has added what it has at hand (followRollouts adds every target first).
    queueMicrotask(() => {
      this.#run().catch((e: unknown) => {
        // Only a bug gets here (a health rule that throws): answer for every member rather than hang.
        const message = `could not follow: ${e instanceof Error ? e.message : String(e)}`;
        for (const m of this.#waiting()) this.#settle(m, { rollout: 'failed', message });
        this.#end();
      });
    });
  }

  ended(): boolean {
    return this.#stop.signal.aborted;
  }

  /** No more joins: end once every member has its answer. */
  sealed(): void {
    if (this.#pending === 0) this.#end();
  }

  /** End now, answering every member still waiting `progressing`. */
  stopped(): void {
    for (const m of this.#waiting())
      this.#settle(m, {
        ...lastWord(m, 'progressing', this.#clock.now()),
        message: 'no longer followed: the process is stopping',
      });
    this.#end();
  }

  join(target: FollowTarget): Promise<FollowedRollout> {
    return new Promise<FollowedRollout>((resolve) => {
      const m: Member = { target, seq: this.#joins++, answer: resolve };
      this.#pending++;
      this.#byName.set(target.name, [...(this.#byName.get(target.name) ?? []), m]);
      if (target.name !== this.#first.name && !this.#several) {
        this.#several = true;
        // The open watch is by name and would never carry this one: relist the whole namespace.
        if (this.#selector !== undefined) {
          this.#relist = true;
          this.#request?.abort();
        }
      }
      // One look: the LIST answers every member; no timer.
      if (this.#options.once) return;
      this.#armDeadline(m);
      // The watch is open: answer from what it has seen (a later restart's events follow on the same stream).
      if (this.#listed && this.#known.has(target.name)) this.#evaluate(m, this.#known.get(target.name));
    });
  }

  /** Per member, cut short by the call's budget. */
  #armDeadline(m: Member): void {
    const deadline = m.target.startedAt + m.target.timeoutMs;
    const at = Math.min(deadline, this.#budgetEnd);
    // Decided when the timer is set, not by comparing clocks when it fires (timers may fire a millisecond early).
    const state: RolloutState = deadline <= this.#budgetEnd ? 'timeout' : 'progressing';
    const now = this.#clock.now();
    // Already past its deadline: read the status first (it may be complete by now), within a short grace.
    const delay = at > now ? at - now : Math.min(PAST_DEADLINE_GRACE_MS, Math.max(0, this.#budgetEnd - now));
    m.timer = setTimeout(() => this.#settle(m, lastWord(m, state, this.#clock.now())), delay);
  }

  #waiting(): Member[] {
    return [...this.#byName.values()].flat();
  }

  #end(): void {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort();
    this.#wake?.();
  }

  #settle(m: Member, done: FollowedRollout): void {
    if (m.done) return;
    m.done = done;
    clearTimeout(m.timer);
    const rest = (this.#byName.get(m.target.name) ?? []).filter((x) => x !== m);
    if (rest.length > 0) this.#byName.set(m.target.name, rest);
    else this.#byName.delete(m.target.name);
    this.#options.onProgress?.(m.target.id, done);
    m.answer(done);
    if (--this.#pending === 0 && this.#isSealed()) this.#end();
  }

  #seen(obj: KubeObject, deleted: boolean): Seen {
    const uid = obj.metadata?.uid;
    if (deleted) return { deleted: true, ...(uid === undefined ? {} : { uid }) };
    const { descriptor } = this.#first;
    const token = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartToken];
    return {
      deleted: false,
      ...(uid === undefined ? {} : { uid }),
      generation: obj.metadata?.generation ?? 0,
      ...(token === undefined ? {} : { token }),
      health: descriptor.health(obj),
    };
  }

  #evaluate(m: Member, s: Seen | undefined): void {
    if (m.done) return;
    const { target } = m;
    const { kind } = this.#first.descriptor;
    // What the watch saw of the object before this member's restart (a shared watch may lag behind the patch):
    // an older generation of the same object says nothing about this rollout. The events that follow will.
    const sameObject = target.uid !== undefined && s?.uid === target.uid;
    if (s?.deleted && target.uid !== undefined && s.uid !== undefined && !sameObject) return;
    if (s && !s.deleted && sameObject && s.generation < (target.generation ?? 0)) return;
    const now = this.#clock.now();
    const elapsed = now - target.startedAt;
    if (s === undefined || s.deleted)
      return this.#settle(m, {
        rollout: 'failed',
        message: `${kind} ${target.namespace}/${target.name} no longer exists`,
      });
    let health = s.health;
    // Versions only move forward: a later restart includes ours, and its rollout is the one to follow.
    if (s.token !== undefined && s.token !== target.restartToken)
      health = { ...health, message: `${health.message} (restarted again since, restart ${s.token.slice(0, 12)})` };
    m.last = health;
    m.lastError = undefined;
    const pods = health.pods ? { pods: health.pods } : {};
    if (health.state === 'progressing' && now >= target.startedAt + target.timeoutMs) {
      // Past its deadline when read (a follow-up, a wave's gate): the status read says why.
      return this.#settle(m, { rollout: 'timeout', ...pods, message: describeRollout('timeout', health, elapsed) });
    }
    if (health.state === 'progressing') {
      this.#options.onProgress?.(target.id, {
        rollout: 'progressing',
        ...pods,
        message: describeRollout('progressing', health, elapsed),
      });
      return;
    }
    const rolloutMs = health.state === 'complete' ? { rolloutMs: Math.max(0, elapsed) } : {};
    this.#settle(m, {
      rollout: health.state,
      ...pods,
      ...rolloutMs,
      message: describeRollout(health.state, health, elapsed),
    });
  }

  #onObject(obj: KubeObject, deleted: boolean): void {
    const name = obj.metadata?.name ?? '';
    const s = this.#seen(obj, deleted);
    this.#known.set(name, s);
    for (const m of this.#byName.get(name) ?? []) this.#evaluate(m, s);
  }

  #noteError(e: unknown): void {
    const f = classifyKubeError(e);
    for (const m of this.#waiting()) m.lastError = `${f.reason}: ${f.detail}`.slice(0, 300);
  }

  /** A wait the group's end cuts short (never a step's wait: this is the watch's own reconnect backoff). */
  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => ((this.#wake = undefined), resolve()), ms);
      this.#wake = () => (clearTimeout(t), (this.#wake = undefined), resolve());
    });
  }

  #listOptions(): { fieldSelector: string } | undefined {
    return this.#selector ? { fieldSelector: `metadata.name=${this.#selector}` } : undefined;
  }

  async #run(): Promise<void> {
    if (this.#options.once) return this.#lookOnce();
    while (!this.#stop.signal.aborted) {
      const resourceVersion = await this.#list();
      if (resourceVersion === undefined) continue;
      if (this.#poll) {
        await this.#pause(this.#options.pollMs ?? 2_000);
        continue;
      }
      await this.#watchFrom(resourceVersion);
    }
  }

  /** Once: what one LIST says, and every member still without an answer is `progressing` (or past its deadline). */
  async #lookOnce(): Promise<void> {
    const { api, descriptor, namespace, name } = this.#first;
    try {
      const notOlderThan = newestVersion(this.#waiting().map((m) => m.target.resourceVersion));
      const answer = await api.listForWatch(descriptor, namespace, {
        ...(this.#several ? {} : { fieldSelector: `metadata.name=${name}` }),
        ...(notOlderThan === undefined ? {} : { notOlderThan }),
      });
      this.#known = new Map(answer.items.map((o) => [o.metadata?.name ?? '', this.#seen(o, false)]));
      this.#listed = true;
      for (const m of this.#waiting()) this.#evaluate(m, this.#known.get(m.target.name));
    } catch (e) {
      this.#noteError(e);
    }
    const now = this.#clock.now();
    for (const m of this.#waiting())
      this.#settle(m, lastWord(m, now >= m.target.startedAt + m.target.timeoutMs ? 'timeout' : 'progressing', now));
    this.#end();
  }

  /**
   * One LIST, every member answered from it; its resourceVersion, or undefined to list again (after a backoff on
   * error).
   */
  async #list(): Promise<string | undefined> {
    const { api, descriptor, namespace } = this.#first;
    this.#selector = this.#several ? undefined : this.#first.name;
    const listedFrom = this.#joins;
    try {
      const answer = await api.listForWatch(descriptor, namespace, this.#listOptions());
      // A selector that no longer covers every member (one joined during the LIST): list again, wider.
      if (this.#selector !== undefined && this.#several) return undefined;
      this.#known = new Map(answer.items.map((o) => [o.metadata?.name ?? '', this.#seen(o, false)]));
      this.#listed = true;
      for (const m of this.#waiting())
        if (this.#known.has(m.target.name) || m.seq < listedFrom) this.#evaluate(m, this.#known.get(m.target.name));
      return answer.resourceVersion;
    } catch (e) {
      this.#noteError(e);
      await this.#pause(backoff(++this.#failures));
      return undefined;
    }
  }

  /** Watches from a LIST's version until the group ends, a wider LIST is needed, or the watch fails. */
  async #watchFrom(listedVersion: string): Promise<void> {
    const { api, descriptor, namespace } = this.#first;
    let resourceVersion = listedVersion;
    this.#relist = false;
    try {
      while (!this.#stop.signal.aborted && !this.#relist) {
        const remaining = Math.max(1, Math.ceil((this.#budgetEnd - this.#clock.now()) / 1000));
        this.#request = new AbortController();
        await api.watch(descriptor, namespace, {
          resourceVersion,
          timeoutSeconds: Math.min(this.#options.watchSeconds ?? 60, remaining),
          signal: AbortSignal.any([this.#stop.signal, this.#request.signal]),
          ...this.#listOptions(),
          onEvent: (event) => {
            resourceVersion = event.object.metadata?.resourceVersion ?? resourceVersion;
            if (event.type !== 'BOOKMARK') this.#onObject(event.object, event.type === 'DELETED');
          },
        });
        this.#failures = 0;
      }
    } catch (e) {
      // 410 Gone: the version is too old to resume from; relist now. 403: watching is not granted; poll instead.
      if (e instanceof ApiException && e.code === 410) return;
      if (e instanceof ApiException && e.code === 403) {
        this.#poll = true;
        for (const m of this.#waiting()) m.lastError = 'watch is forbidden (grant watch; following by LIST meanwhile)';
        return;
      }
      this.#noteError(e);
      await this.#pause(backoff(++this.#failures));
    }
  }
}
