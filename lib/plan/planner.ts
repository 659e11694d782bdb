/**
 * Changes -> rollout targets. Pure and deterministic: no clock, no network, no environment, so `plan`,
 * dry-run and replays agree byte for byte. A workload hit by several changes of one batch is planned once,
 * with every route and path that hit it; per path only the newest change counts (versions only move forward).
 */
import { hash } from 'node:crypto';
import { qualify } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { matchRoutes } from '../routing/router.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { fixedTargetsOf, planTarget } from './plan-target.ts';
import {
  targetKey,
  type KeysUsed,
  type Plan,
  type PlannedTarget,
  type PlanProblem,
  type RolloutTarget,
  type SecretRef,
} from './rollout-target.ts';
import { newestStamp, rfc3339Seconds } from './stamps.ts';

export type {
  ConsumersRolloutTarget,
  KeysUsed,
  Plan,
  PlanProblem,
  ResourceRolloutTarget,
  RolloutTarget,
  SecretRef,
  WorkloadRolloutTarget,
} from './rollout-target.ts';

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
  return digest(secrets.length === 1 ? secretPart(secrets[0] as SecretRef) : secrets.map(secretPart).sort().join('\n'));
}

// The one-shot hash: the same digest without a Hash object per target (2 per audit entry at 10,000 routes).
const digest = (parts: string): string => hash('sha256', parts, 'hex').slice(0, 32);

interface Accumulator {
  target: PlannedTarget;
  renderedFrom: SecretRef;
  /** The route that named it, or the routes once a second one does (most targets are named by one route). */
  routes: string | Set<string>;
  /** The newest change per path: one change, or a map by path once a second path hits the target. */
  secrets: SecretRef | Map<string, SecretRef>;
  /**
   * Per path: the keys the routes that named the target for it use; `all` once one of them names none. Made when the
   * first route names keys: until then every use is `all` and the target carries no `uses`.
   */
  uses: Map<string, KeysUsed | 'all'> | undefined;
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
        const fixed = fixedTargetsOf(compiled);
        if (fixed) {
          for (const { planned, key } of fixed)
            accumulate(byKey, key, planned, secret, route.name, compiled.target.keys);
          continue;
        }
        const planned = planTarget(compiled, captures, builtinsOf);
        if ('error' in planned) {
          problems.push({ route: route.name, path: secret.path, record: change.record, error: planned.error });
          continue;
        }
        for (const cluster of compiled.clusters) {
          const one = { ...planned, cluster };
          accumulate(byKey, targetKey(one), one, secret, route.name, compiled.target.keys);
        }
      }
    }
  }
  return { targets: finishTargets(byKey), routed, problems };
}

/** Adds a planned target of one cluster: the same workload named again gathers the route and the path. */
function accumulate(
  byKey: Map<string, Accumulator>,
  key: string,
  t: PlannedTarget,
  secret: SecretRef,
  route: string,
  keys: readonly string[] | undefined,
): void {
  const acc = byKey.get(key);
  if (!acc) {
    const uses = keys === undefined ? undefined : new Map<string, KeysUsed | 'all'>();
    if (uses) addUse(uses, secret.path, keys, `route ${route}`);
    byKey.set(key, { target: t, renderedFrom: secret, routes: route, secrets: secret, uses });
    return;
  }
  if (newer(secret, acc.renderedFrom)) {
    // A resource patch may use {version}: it is rendered from the newest change that hit the target.
    acc.target = t;
    acc.renderedFrom = secret;
  }
  if (typeof acc.routes === 'string') {
    if (acc.routes !== route) acc.routes = new Set([acc.routes, route]);
  } else acc.routes.add(route);
  // Every path that hit the target so far was used whole until a route names keys.
  if (acc.uses === undefined && keys !== undefined)
    acc.uses = new Map(secretsOf(acc).map((s): [string, 'all'] => [s.path, 'all']));
  if (acc.uses) addUse(acc.uses, secret.path, keys, `route ${route}`);
  const held = acc.secrets;
  if (held instanceof Map) {
    const known = held.get(secret.path);
    if (!known || newer(secret, known)) held.set(secret.path, secret);
  } else if (held.path !== secret.path) acc.secrets = new Map([held, secret].map((s) => [s.path, s]));
  else if (newer(secret, held)) acc.secrets = secret;
}

const secretsOf = (acc: Accumulator): SecretRef[] =>
  acc.secrets instanceof Map ? [...acc.secrets.values()] : [acc.secrets];

/** The accumulated targets, in key order, with their routes, paths, secrets, restart token and time. */
function finishTargets(byKey: ReadonlyMap<string, Accumulator>): RolloutTarget[] {
  // Date parsing is the costliest step per target: stamp each distinct time once.
  const stamps = new Map<string, string | null>();
  const stamp = (time: string): string | null => {
    let at = stamps.get(time);
    if (at === undefined) stamps.set(time, (at = rfc3339Seconds(time)));
    return at;
  };
  // A change planned for several clusters or workloads has one token: hash it once.
  const tokens = new Map<string, string>();
  const tokenOf = (secrets: readonly SecretRef[]): string => {
    if (secrets.length !== 1) return restartToken(secrets);
    const part = secretPart(secrets[0] as SecretRef);
    let token = tokens.get(part);
    if (token === undefined) tokens.set(part, (token = digest(part)));
    return token;
  };
  // The default sort orders strings by UTF-16 code units, as `<` does, without a comparator call per comparison.
  const targets = [...byKey.keys()].sort().map((key): RolloutTarget => {
    const acc = byKey.get(key) as Accumulator;
    // Most targets are hit by one path through one route: no sort, no filter for those.
    const secrets = secretsOf(acc);
    if (secrets.length > 1) secrets.sort((a, b) => (a.path < b.path ? -1 : 1));
    const routes = typeof acc.routes === 'string' ? [acc.routes] : [...acc.routes].sort();
    const uses = acc.uses
      ? [...acc.uses].filter((e): e is [string, KeysUsed] => e[1] !== 'all').sort(([a], [b]) => (a < b ? -1 : 1))
      : [];
    return {
      ...acc.target,
      routes,
      paths: secrets.map((s) => s.path),
      secrets,
      restartToken: tokenOf(secrets),
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
