/**
 * One target of a route rendered for one change (lib/plan/planner.ts): its namespace, name or selector from the
 * path's captures, checked against Kubernetes' rules and the target's bounds. A target without placeholders renders
 * the same for every change, so it is rendered, checked and keyed once per table.
 */
import type { Captures } from '../routing/path-pattern.ts';
import {
  consumersOf,
  isConsumersTarget,
  isResourceTarget,
  isSyncTarget,
  type CompiledTarget,
  type NameBound,
} from '../routing/routing-table.ts';
import { parseDuration } from '../routing/schema.ts';
import type { ConsumersTarget, ResourceTarget, SyncTarget, WorkloadTarget } from '../routing/target-schema.ts';
import { renderDeep } from '../routing/template.ts';
import { renderName, renderNamespace, renderSelector } from './render-target.ts';
import { targetKey, type PlannedTarget } from './rollout-target.ts';

/** A fixed target of one cluster, with its key. */
export interface FixedTarget {
  planned: PlannedTarget;
  key: string;
}

/** Per compiled target: its fixed targets per cluster, or null when it renders from the change. */
const fixedTargets = new WeakMap<CompiledTarget, readonly FixedTarget[] | null>();
const NO_CAPTURES: Captures = Object.freeze({});

/**
 * The target per cluster when it has no placeholder (most targets of a big table name their workload): the same
 * for every change. Null for one that renders from the change, or whose fixed text fails its checks (planned each
 * time, so each change reports the problem).
 */
export function fixedTargetsOf(compiled: CompiledTarget): readonly FixedTarget[] | null {
  let fixed = fixedTargets.get(compiled);
  if (fixed === undefined) {
    fixed = null;
    if (!hasPlaceholders(compiled)) {
      const planned = planTarget(compiled, NO_CAPTURES, () => NO_CAPTURES);
      if (!('error' in planned))
        fixed = compiled.clusters.map((cluster) => {
          const one = Object.freeze({ ...planned, cluster });
          return { planned: one, key: targetKey(one) };
        });
    }
    fixedTargets.set(compiled, fixed);
  }
  return fixed;
}

/** Whether anything the target renders may take a value from the change. Resources may use built-ins anywhere. */
function hasPlaceholders({ target }: CompiledTarget): boolean {
  if (isResourceTarget(target)) return true;
  const texts = isSyncTarget(target)
    ? [target.namespace, target.sync.name]
    : isConsumersTarget(target)
      ? [target.namespace, consumersOf(target).name]
      : [target.namespace, target.name ?? '', target.selector ?? ''];
  return texts.some((text) => text.includes('{'));
}

/** One target of a route, rendered for a change (its cluster still to fill in), or why it cannot be. */
export function planTarget(
  { target, namespaces: bound, names: nameBound }: CompiledTarget,
  captures: Captures,
  builtinsOf: () => Record<string, string>,
): PlannedTarget | { error: string } {
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
): PlannedTarget | { error: string } {
  const name = renderName(target.resource.name, builtins, nameBound);
  const namespace =
    target.resource.namespace === undefined ? '' : renderNamespace(target.resource.namespace, builtins, bound);
  const bad = [name, namespace].find((v): v is { error: string } => typeof v !== 'string');
  if (bad) return bad;
  const planned: PlannedTarget = {
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
): PlannedTarget | { error: string } {
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
  const planned: PlannedTarget = {
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
): PlannedTarget | { error: string } {
  const namespace = renderNamespace(target.namespace, captures, bound);
  const name = target.name === undefined ? undefined : renderName(target.name, captures, nameBound);
  const selector = target.selector === undefined ? undefined : renderSelector(target.selector, captures);
  const bad = [namespace, name, selector].find((v): v is { error: string } => typeof v === 'object');
  if (bad) return bad;
  const planned: PlannedTarget = { type: 'workload', cluster: '', namespace: namespace as string, kind: target.kind };
  if (name !== undefined) planned.name = name as string;
  if (selector !== undefined) planned.selector = selector as string;
  if (target.annotated) planned.annotated = true;
  if (target.restartBy === 'template') planned.restartBy = 'template';
  return planned;
}
