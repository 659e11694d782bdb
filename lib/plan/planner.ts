/**
 * Changes -> rollout targets. Pure and deterministic: no clock, no network, no environment, so `plan`,
 * dry-run and replays agree byte for byte. A workload hit by several changes of one batch is planned once,
 * with every route and path that hit it; per path only the newest change counts (versions only move forward).
 */
import { hash } from 'node:crypto';
import { qualify } from '../sources/kv-mounts.ts';
import type { Operation, SecretChange } from '../sources/secret-change.ts';
import type { Captures } from '../routing/path-pattern.ts';
import { matchRoutes } from '../routing/router.ts';
import {
  consumersOf,
  isConsumersTarget,
  isResourceTarget,
  isSyncTarget,
  type CompiledTarget,
  type NameBound,
  type RoutingTable,
} from '../routing/routing-table.ts';
import { parseDuration } from '../routing/schema.ts';
import {
  type ConsumersTarget,
  type ResourceTarget,
  type SyncKind,
  type SyncTarget,
  type WorkloadKind,
  type WorkloadTarget,
} from '../routing/target-schema.ts';
import { renderDeep } from '../routing/template.ts';
import { renderName, renderNamespace, renderSelector } from './render-target.ts';
import { newestStamp, rfc3339Seconds } from './stamps.ts';

/** The secret version a target is restarted for: the newest change of one Vault path. */
export interface SecretRef {
  /** Namespace-qualified `mount/key`, as Vault's API addresses it from the root namespace. */
  path: string;
  operation: Operation;
  version: number | null;
  /** The change's id and time: identify versionless changes (KV v1, deletes). */
  id: string;
  time: string;
  /**
   * The keys this change changed, relative to the version before it (resolved by the intake from the
   * audit log's HMACs); absent: every key (no comparison was possible). A target whose keys are disjoint from them
   * is skipped only while its record is at the version before (lib/plan/changed-keys.ts keyLevelSkip).
   */
  changedKeys?: string[];
}

/** The keys a target uses of one secret path, and where they are known from (`route <name>`...). */
export interface KeysUsed {
  keys: string[];
  from: string[];
}

interface TargetBase {
  cluster: string;
  namespace: string;
  routes: string[];
  paths: string[];
  secrets: SecretRef[];
  /** Derived only from `secrets`: equal tokens mean the same restart, so a replay is recognisable. */
  restartToken: string;
  /** RFC 3339 (UTC, seconds) of the newest change: what `restartedAt` records, never the clock of a retry. */
  restartedAt: string | null;
  /**
   * Per secret path, the keys the target uses, when every route that named it for that path says which (`keys:`);
   * a path absent here uses every key. Absent when no path has keys.
   */
  uses?: Record<string, KeysUsed>;
}

export interface WorkloadRolloutTarget extends TargetBase {
  type: 'workload';
  kind: WorkloadKind;
  name?: string;
  selector?: string;
  annotated?: true;
  /** A Rollout restarted by a new revision of its pod template (lib/routing/rollout-restart-by.ts); absent: restartAt. */
  restartBy?: 'template';
}

export interface ResourceRolloutTarget extends TargetBase {
  type: 'resource';
  apiVersion: string;
  kind: string;
  name: string;
  /** The route's merge-patch template, rendered. */
  patch: Record<string, unknown>;
  /** The status condition that says the operator is done (the route's `wait`), if any. */
  wait?: { condition: string };
}

/**
 * Restart the consumers of a Secret: the workloads whose pod template references it (or, for `SecretProviderClass`,
 * mounts that class through the CSI driver). With a sync kind, the operator's resource of that name is nudged first,
 * and the Secret is the one it writes; the consumers restart only once it has written it.
 */
export interface ConsumersRolloutTarget extends TargetBase {
  type: 'consumers';
  /** What the route names: the operator's resource to sync, or the Secret / SecretProviderClass itself. */
  kind: SyncKind | 'Secret' | 'SecretProviderClass';
  name: string;
  /** `none`: sync only, restart nothing. */
  restart: 'consumers' | 'none';
  /** How long the operator may take to write the Secret (sync kinds only); default DEFAULT_SYNC_TIMEOUT_MS. */
  syncTimeoutMs?: number;
}

export type RolloutTarget = WorkloadRolloutTarget | ResourceRolloutTarget | ConsumersRolloutTarget;

/**
 * A target a route names but that was not planned: a captured value that is no Kubernetes name, no label value in a
 * selector, a namespace outside the target's `namespaces` or a name outside its `names`.
 */
export interface PlanProblem {
  route: string;
  path: string;
  record: string;
  error: string;
}

export interface Plan {
  targets: RolloutTarget[];
  /** For each input change, the routes it matched (same order as the input). */
  routed: string[][];
  problems: PlanProblem[];
}

/** Newer wins: higher version, then later time, then larger id, so the choice never depends on order. */
function newer(a: SecretRef, b: SecretRef): boolean {
  if (a.version !== null && b.version !== null && a.version !== b.version) return a.version > b.version;
  if (a.time !== b.time) return a.time > b.time;
  return a.id > b.id;
}

/**
 * A write of a version is that version, whichever feed reports it; anything else is one event (a delete of version 3
 * can happen again after an undelete), so its Vault request or event id and time are part of it.
 */
function secretPart(s: SecretRef): string {
  if (s.version === null) return `${s.path}#${s.operation}:${s.id}@${s.time}`;
  return s.operation === 'write' ? `${s.path}@${s.version}` : `${s.path}@${s.version}:${s.operation}:${s.id}@${s.time}`;
}

export function restartToken(secrets: readonly SecretRef[]): string {
  const parts = secrets.length === 1 ? [secretPart(secrets[0] as SecretRef)] : secrets.map(secretPart).sort();
  // The one-shot hash: the same digest without a Hash object per target (2 per audit entry at 10,000 routes).
  return hash('sha256', parts.join('\n'), 'hex').slice(0, 32);
}

type PlannedLater = 'routes' | 'paths' | 'secrets' | 'restartToken' | 'restartedAt' | 'uses';

interface Accumulator {
  target:
    | Omit<WorkloadRolloutTarget, PlannedLater>
    | Omit<ResourceRolloutTarget, PlannedLater>
    | Omit<ConsumersRolloutTarget, PlannedLater>;
  renderedFrom: SecretRef;
  routes: Set<string>;
  secrets: Map<string, SecretRef>;
  /** Per path: the keys the routes that named the target for it use; `all` once one of them names none. */
  uses: Map<string, KeysUsed | 'all'>;
  /** Whether any route named keys for it: without, every use is `all` and the target carries no `uses`. */
  keyed: boolean;
}

/** Adds what one route's target says it uses of `path`: its keys, or every key. */
function addUse(
  uses: Map<string, KeysUsed | 'all'>,
  path: string,
  keys: readonly string[] | undefined,
  from: string,
): void {
  const known = uses.get(path);
  if (known === 'all') return;
  if (keys === undefined) {
    uses.set(path, 'all');
    return;
  }
  uses.set(path, {
    keys: [...new Set([...(known?.keys ?? []), ...keys])].sort(),
    from: [...new Set([...(known?.from ?? []), from])].sort(),
  });
}

type Planned = Accumulator['target'];

export function planRollouts(table: RoutingTable, changes: readonly SecretChange[]): Plan {
  const byKey = new Map<string, Accumulator>();
  const routed: string[][] = [];
  const problems: PlanProblem[] = [];
  for (const change of changes) {
    const matches = matchRoutes(table, change);
    routed.push(matches.map((m) => m.route.name));
    const secret: SecretRef = {
      path: qualify(change.namespace, change.path),
      operation: change.operation,
      version: change.version,
      id: change.id,
      time: change.time,
      ...(change.changedKeys === undefined ? {} : { changedKeys: change.changedKeys }),
    };
    for (const { route, captures } of matches) {
      // The built-ins only resource targets may use: made for the first one (most routes have none).
      let builtins: Record<string, string> | undefined;
      const builtinsOf = (): Record<string, string> =>
        (builtins ??= {
          ...captures,
          version: change.version === null ? '' : String(change.version),
          path: change.path,
          key: change.key,
          mount: change.mount,
          vaultNamespace: change.namespace,
          operation: change.operation,
        });
      for (const compiled of route.targets) {
        const planned = planTarget(compiled, captures, builtinsOf);
        if ('error' in planned) {
          problems.push({ route: route.name, path: secret.path, record: change.record, error: planned.error });
          continue;
        }
        for (const cluster of compiled.clusters)
          accumulate(byKey, { ...planned, cluster }, secret, route.name, compiled.target.keys);
      }
    }
  }
  return { targets: finishTargets(byKey), routed, problems };
}

/** One target of a route, rendered for a change (its cluster still to fill in), or why it cannot be. */
function planTarget(
  { target, namespaces: bound, names: nameBound }: CompiledTarget,
  captures: Captures,
  builtinsOf: () => Record<string, string>,
): Planned | { error: string } {
  if (isResourceTarget(target)) return planResource(target, builtinsOf(), bound, nameBound);
  if (isSyncTarget(target) || isConsumersTarget(target)) return planConsumers(target, captures, bound, nameBound);
  return planWorkload(target, captures, bound, nameBound);
}

/** A custom resource: its name, namespace and merge patch rendered with the captures and the built-ins. */
function planResource(
  target: ResourceTarget,
  builtins: Record<string, string>,
  bound: NameBound | undefined,
  nameBound: NameBound | undefined,
): Planned | { error: string } {
  const name = renderName(target.resource.name, builtins, nameBound);
  const namespace =
    target.resource.namespace === undefined ? '' : renderNamespace(target.resource.namespace, builtins, bound);
  const bad = [name, namespace].find((v): v is { error: string } => typeof v !== 'string');
  if (bad) return bad;
  const planned: Planned = {
    type: 'resource',
    cluster: '',
    namespace: namespace as string,
    apiVersion: target.resource.apiVersion,
    kind: target.resource.kind,
    name: name as string,
    patch: renderDeep(target.patch, builtins) as Record<string, unknown>,
  };
  if (target.wait) planned.wait = { condition: target.wait.condition };
  return planned;
}

/** A sync through an operator, or the consumers of a Secret or SecretProviderClass. */
function planConsumers(
  target: SyncTarget | ConsumersTarget,
  captures: Captures,
  bound: NameBound | undefined,
  nameBound: NameBound | undefined,
): Planned | { error: string } {
  const named = isSyncTarget(target)
    ? { kind: target.sync.kind, name: target.sync.name }
    : (({ field, name: n }) => ({
        kind: field === 'secret' ? ('Secret' as const) : ('SecretProviderClass' as const),
        name: n,
      }))(consumersOf(target));
  const namespace = renderNamespace(target.namespace, captures, bound);
  const name = renderName(named.name, captures, nameBound);
  const bad = [namespace, name].find((v): v is { error: string } => typeof v !== 'string');
  if (bad) return bad;
  const planned: Planned = {
    type: 'consumers',
    cluster: '',
    namespace: namespace as string,
    kind: named.kind,
    name: name as string,
    restart: isSyncTarget(target) ? target.restart : 'consumers',
  };
  const timeout =
    isSyncTarget(target) && target.sync.timeout !== undefined ? parseDuration(target.sync.timeout) : undefined;
  if (timeout !== undefined) planned.syncTimeoutMs = timeout;
  return planned;
}

/** A workload by name, by selector, or every one of its kind that opts in by annotation. */
function planWorkload(
  target: WorkloadTarget,
  captures: Captures,
  bound: NameBound | undefined,
  nameBound: NameBound | undefined,
): Planned | { error: string } {
  const namespace = renderNamespace(target.namespace, captures, bound);
  const name = target.name === undefined ? undefined : renderName(target.name, captures, nameBound);
  const selector = target.selector === undefined ? undefined : renderSelector(target.selector, captures);
  const bad = [namespace, name, selector].find((v): v is { error: string } => typeof v === 'object');
  if (bad) return bad;
  const planned: Planned = { type: 'workload', cluster: '', namespace: namespace as string, kind: target.kind };
  if (name !== undefined) planned.name = name as string;
  if (selector !== undefined) planned.selector = selector as string;
  if (target.annotated) planned.annotated = true;
  if (target.restartBy === 'template') planned.restartBy = 'template';
  return planned;
}

/** Adds a planned target of one cluster: the same workload named again gathers the route and the path. */
function accumulate(
  byKey: Map<string, Accumulator>,
  t: Planned,
  secret: SecretRef,
  route: string,
  keys: readonly string[] | undefined,
): void {
  const key = targetKey(t);
  let acc = byKey.get(key);
  if (!acc)
    byKey.set(
      key,
      (acc = { target: t, renderedFrom: secret, routes: new Set(), secrets: new Map(), uses: new Map(), keyed: false }),
    );
  else if (newer(secret, acc.renderedFrom)) {
    // A resource patch may use {version}: it is rendered from the newest change that hit the target.
    acc.target = t;
    acc.renderedFrom = secret;
  }
  acc.routes.add(route);
  if (keys !== undefined) acc.keyed = true;
  addUse(acc.uses, secret.path, keys, `route ${route}`);
  const known = acc.secrets.get(secret.path);
  if (!known || newer(secret, known)) acc.secrets.set(secret.path, secret);
}

/** The accumulated targets, in key order, with their routes, paths, secrets, restart token and time. */
function finishTargets(byKey: ReadonlyMap<string, Accumulator>): RolloutTarget[] {
  // Date parsing is the costliest step per target: stamp each distinct time once.
  const stamps = new Map<string, string | null>();
  const stamp = (time: string): string | null => {
    let at = stamps.get(time);
    if (at === undefined) stamps.set(time, (at = rfc3339Seconds(time)));
    return at;
  };
  // The default sort orders strings by UTF-16 code units, as `<` does, without a comparator call per comparison.
  const targets = [...byKey.keys()].sort().map((key): RolloutTarget => {
    const acc = byKey.get(key) as Accumulator;
    // Most targets are hit by one path through one route: no sort, no filter for those.
    const secrets = [...acc.secrets.values()];
    if (secrets.length > 1) secrets.sort((a, b) => (a.path < b.path ? -1 : 1));
    const routes = [...acc.routes];
    if (routes.length > 1) routes.sort();
    const uses = acc.keyed
      ? [...acc.uses].filter((e): e is [string, KeysUsed] => e[1] !== 'all').sort(([a], [b]) => (a < b ? -1 : 1))
      : [];
    return {
      ...acc.target,
      routes,
      paths: secrets.map((s) => s.path),
      secrets,
      restartToken: restartToken(secrets),
      restartedAt: newestStamp(secrets, stamp),
      ...(uses.length > 0 ? { uses: Object.fromEntries(uses) } : {}),
    } as RolloutTarget;
  });
  return targets;
}

/** Targets per cluster, in plan order: each cluster is queued and worked on its own. */
export function targetsByCluster<T extends { cluster: string }>(targets: readonly T[]): Map<string, T[]> {
  const byCluster = new Map<string, T[]>();
  for (const t of targets) byCluster.set(t.cluster, [...(byCluster.get(t.cluster) ?? []), t]);
  return byCluster;
}

/** The identity of a target: two routes naming the same workload plan it once. */
export function targetKey(t: Accumulator['target']): string {
  const what =
    t.type === 'resource'
      ? `${t.apiVersion}/${t.kind}/${t.name}`
      : t.type === 'consumers'
        ? `consumers/${t.kind}/${t.name}`
        : `${t.kind}/${t.name !== undefined ? `name=${t.name}` : t.selector !== undefined ? `selector=${t.selector}` : 'annotated'}`;
  return `${t.cluster}\u0000${t.namespace}\u0000${what}`;
}
