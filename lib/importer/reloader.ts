/**
 * Stakater Reloader's annotations: which workloads it restarts when a Secret changes (regexps matched in linear time).
 */
import { podSpecOf, referencesIn } from '../workloads/consumers.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import { WorkloadKinds, type WorkloadKind } from '../routing/target-schema.ts';
import { compileGoRegexp } from './go-regexp.ts';

/** Everything listed from one cluster. Kinds that are not installed (or not readable) are named in `missing`. */

/**
 * Does the pod template read this Secret? The same rule `restart: consumers` uses when it runs
 * (lib/workloads/consumers.ts:
 * env, envFrom, secret and projected volumes; init and ephemeral containers count), so import's view of who consumes a
 * Secret is the product's.
 */
export const referencesSecret = (workload: KubeObject, secret: string): boolean =>
  (WorkloadKinds as readonly string[]).includes(workload.kind ?? '') &&
  referencesIn(podSpecOf(workload.kind as WorkloadKind, workload), { secret }).length > 0;

export const RELOADER = {
  auto: 'reloader.stakater.com/auto',
  secretAuto: 'secret.reloader.stakater.com/auto',
  secretReload: 'secret.reloader.stakater.com/reload',
  search: 'reloader.stakater.com/search',
  match: 'reloader.stakater.com/match',
  ignore: 'reloader.stakater.com/ignore',
} as const;

const MAX_RELOAD_ENTRIES = 64;
const MAX_RELOAD_ENTRY_LENGTH = 253;

/**
 * Reloader's named list: comma-separated names, each compiled by Reloader as the Go regexp `^name$` (string
 * concatenation, so `a|b` reads as `^a|b$`), and compared as text when it does not compile. Evaluated here by the
 * linear-time matcher of ./go-regexp.ts, never a backtracking RegExp: anyone who may edit a workload writes this
 * annotation.
 */
function namedReloadMatches(value: string, secret: string): boolean {
  return value
    .split(',')
    .slice(0, MAX_RELOAD_ENTRIES)
    .map((v) => v.trim())
    .filter((v) => v !== '' && v.length <= MAX_RELOAD_ENTRY_LENGTH)
    .some((v) => {
      if (v === secret) return true;
      const pattern = compileGoRegexp(`^${v}$`);
      return !('error' in pattern) && pattern.test(secret);
    });
}

/**
 * Would Stakater Reloader restart this workload when the Secret changes? Its rules: a name in
 * `secret.reloader.stakater.com/reload`; or `reloader.stakater.com/auto` / `secret.reloader.stakater.com/auto` "true"
 * and the pod template references the Secret; or `reloader.stakater.com/search` "true", the Secret annotated
 * `reloader.stakater.com/match` "true", and referenced. A Secret annotated `reloader.stakater.com/ignore` "true"
 * restarts nothing.
 */
export function reloaderRestarts(
  workload: KubeObject,
  secret: string,
  secretAnnotations: Record<string, string>,
): boolean {
  if (secretAnnotations[RELOADER.ignore] === 'true') return false;
  const a = workload.metadata?.annotations ?? {};
  const named = a[RELOADER.secretReload];
  if (named !== undefined && namedReloadMatches(named, secret)) return true;
  if (!referencesSecret(workload, secret)) return false;
  if (a[RELOADER.auto] === 'true' || a[RELOADER.secretAuto] === 'true') return true;
  return a[RELOADER.search] === 'true' && secretAnnotations[RELOADER.match] === 'true';
}
