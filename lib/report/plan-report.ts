/** How a plan is shown: the JSON document of `plan --json`, and the table a person reads before anything happens. */
import type { Plan, RolloutTarget } from '../plan/planner.ts';
import type { ChangeSet } from '../plan/waves.ts';
import { targetWave } from '../plan/target-waves.ts';
import { keyLevelSkip } from '../plan/changed-keys.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { ParseResult } from '../sources/secret-change.ts';
import type { CompiledRoute } from '../routing/table-model.ts';
import { controlsText } from './plan-controls.ts';
import { table } from './table.ts';

export function planJson(parsed: ParseResult, plan: Plan, sets: readonly ChangeSet[] = []) {
  return {
    changes: parsed.changes.map((c, i) => ({
      namespace: c.namespace,
      mount: c.mount,
      key: c.key,
      path: c.path,
      operation: c.operation,
      version: c.version,
      source: c.source,
      id: c.id,
      time: c.time,
      via: c.via,
      kvVersion: c.kvVersion,
      kvVersionFrom: c.kvVersionFrom,
      record: c.record,
      routes: plan.routed[i] ?? [],
      // The key names the entry carries (never their digests) and, once the intake compared them, which changed.
      ...(c.keyDigests === undefined ? {} : { keys: c.keyDigests.toJSON() }),
      changedKeys: c.changedKeys ?? 'all',
      // The event's Vault index (not secret), for a tool reading Vault after it: send it as X-Vault-Index.
      ...(c.vaultIndex === undefined ? {} : { vaultIndex: c.vaultIndex }),
    })),
    ignored: parsed.ignored,
    rejected: parsed.rejected,
    targets: plan.targets.map(targetJson),
    problems: plan.problems,
    waves: sets.map((set) => wavesJson(set, plan)),
  };
}

/** A duration as the routing table writes it: 10m, 90s, 1h. */
const seconds = (ms: number): string =>
  ms > 0 && ms % 3_600_000 === 0
    ? `${ms / 3_600_000}h`
    : ms > 0 && ms % 60_000 === 0
      ? `${ms / 60_000}m`
      : `${Math.round(ms / 1000)}s`;

/** One change set's waves in order, each with its targets and the gate that follows it (none after the last). */
function wavesJson(set: ChangeSet, plan: Plan) {
  const paths = new Set(set.changes.map((c) => qualify(c.namespace, c.path)));
  const { gate, onFailure, settleMs } = set.policy;
  return {
    route: set.route,
    changes: set.changes.map((c) => ({ path: c.path, version: c.version })),
    settle: seconds(settleMs),
    waves: set.waves.map((w, i) => ({
      wave: i + 1,
      clusters: w.clusters,
      targets: plan.targets
        .filter((t) => targetWave(set.waves, t) === i && t.paths.some((p) => paths.has(p)))
        .map(targetJson),
      ...(i + 1 < set.waves.length
        ? {
            gate: {
              healthy: gate.healthy,
              timeout: seconds(gate.timeoutMs),
              pause: seconds(gate.pauseMs),
              ...(gate.approval === true ? { approval: true } : {}),
              onFailure,
            },
          }
        : {}),
    })),
  };
}

/** The waves as a person reads them: in order, per target, with the gate between them. */
function wavesText(sets: readonly ChangeSet[], plan: Plan): string[] {
  const out: string[] = [];
  for (const set of sets) {
    const json = wavesJson(set, plan);
    out.push(
      '',
      `Waves of ${json.changes.map((c) => (c.version === null ? c.path : `${c.path}@v${c.version}`)).join(', ')} (route ${set.route}${set.policy.settleMs > 0 ? `, settle ${json.settle}` : ''}):`,
    );
    const rows: string[][] = [];
    const gateAfter = new Map<number, string>();
    for (const w of json.waves) {
      for (const t of w.targets)
        rows.push([
          String(w.wave),
          t.cluster,
          t.namespace || '-',
          t.kind,
          'name' in t && t.name !== undefined
            ? String(t.name)
            : 'selector' in t
              ? `selector ${t.selector}`
              : 'annotated',
        ]);
      if (w.gate)
        gateAfter.set(
          rows.length,
          `  -- gate: ${w.gate.healthy ? 'every target complete' : 'every target restarted'} within ${w.gate.timeout}, then pause ${w.gate.pause}${w.gate.approval ? ', then an approval (vault-rollout approve)' : ''}; on failure: ${w.gate.onFailure} --`,
        );
    }
    // The gates go between the rows of the table (line 0 is its header).
    const lines = table(['WAVE', 'CLUSTER', 'NAMESPACE', 'KIND', 'WORKLOAD'], rows).split('\n');
    out.push(lines.flatMap((line, i) => (gateAfter.has(i) ? [line, gateAfter.get(i) as string] : [line])).join('\n'));
  }
  return out;
}

function targetJson(t: RolloutTarget) {
  const which =
    t.type === 'resource'
      ? { apiVersion: t.apiVersion, name: t.name }
      : t.type === 'consumers'
        ? { name: t.name, restart: t.restart }
        : t.name !== undefined
          ? { name: t.name }
          : t.selector !== undefined
            ? { selector: t.selector }
            : { annotated: true };
  return {
    cluster: t.cluster,
    namespace: t.namespace,
    kind: t.kind,
    ...which,
    routes: t.routes,
    paths: t.paths,
    versions: Object.fromEntries(t.secrets.map((s) => [s.path, s.version])),
    restartToken: t.restartToken,
    restartedAt: t.restartedAt,
    keys: Object.fromEntries(t.paths.map((p) => [p, t.uses?.[p] ?? 'all'])),
    ...(keysWouldSkip(t) === undefined ? {} : { skipWhenAtPrevious: keysWouldSkip(t) }),
    ...(t.type === 'resource' ? { patch: t.patch } : {}),
  };
}

export function describeTarget(t: RolloutTarget): string {
  if (t.type === 'resource') return `${t.name} (${t.apiVersion})`;
  if (t.type === 'consumers')
    return t.kind === 'Secret' || t.kind === 'SecretProviderClass'
      ? `${t.name}: the workloads that reference it`
      : t.restart === 'none'
        ? `${t.name}: sync only`
        : `${t.name}: sync, then restart the consumers of its Secret`;
  return t.name ?? (t.selector !== undefined ? `selector ${t.selector}` : 'annotated (vault-rollout.io/watch)');
}

/**
 * What the engine would say of this target if its record is at the version before each change (the only
 * case it skips): `keys password unchanged in v7`; undefined when it restarts whatever its record.
 */
export function keysWouldSkip(t: RolloutTarget): string | undefined {
  const previous = Object.fromEntries(
    t.secrets.filter((s) => s.version !== null).map((s) => [s.path, (s.version as number) - 1]),
  );
  return keyLevelSkip(t, previous);
}

/** The keys a target uses, per path, and where they are known from: `password, api_key (route r)` or `all`. */
export function keysLabel(t: Pick<RolloutTarget, 'paths' | 'uses'>): string {
  const per = t.paths.map((p) => {
    const used = t.uses?.[p];
    const label = used === undefined ? 'all' : `${used.keys.join(', ')} (${used.from.join(', ')})`;
    return t.paths.length > 1 ? `${p}: ${label}` : label;
  });
  return per.join('; ');
}

/** What a change says of its keys: which changed once compared, else what the entry carries. */
export function changeKeysLabel(c: ParseResult['changes'][number]): string {
  if (c.changedKeys !== undefined)
    return c.changedKeys.length === 0 ? 'none changed' : `changed ${c.changedKeys.join(', ')}`;
  if (c.keyDigests === undefined) return 'all';
  const names = c.keyDigests.names.join(', ');
  return c.keyDigests.mode === 'patch' ? `patch ${names}` : `write ${names}`;
}

const secretLabel = (s: RolloutTarget['secrets'][number]) =>
  s.version === null
    ? `${s.path} (${s.operation})`
    : `${s.path}@v${s.version}${s.operation === 'write' ? '' : ` (${s.operation})`}`;

/** The changes read, in a table with the routes each matched, and a note on KV v1 mounts among the routed. */
function changesText(parsed: ParseResult, plan: Plan): string[] {
  const records = parsed.changes.length + parsed.ignored.length + parsed.rejected.length;
  const out: string[] = [];
  out.push(
    `Changes: ${parsed.changes.length} of ${records} records (${parsed.ignored.length} ignored, ${parsed.rejected.length} rejected)`,
  );
  if (parsed.changes.length > 0) {
    out.push(
      table(
        ['RECORD', 'VAULT NS', 'PATH', 'OPERATION', 'VERSION', 'SOURCE', 'KEYS', 'ROUTES'],
        parsed.changes.map((c, i) => [
          c.record,
          c.namespace || '(root)',
          c.path,
          c.operation,
          c.version === null ? '-' : String(c.version),
          `${c.source}${c.kvVersionFrom === 'inferred' ? ` (kv v${c.kvVersion} inferred)` : ''}`,
          changeKeysLabel(c),
          (plan.routed[i] ?? []).join(',') || '(no route)',
        ]),
      ),
    );
  }
  // KV v1 has no versions: a change missed by the feed stays missed, reconcile cannot find it in Vault's metadata.
  const kv1 = [
    ...new Set(
      parsed.changes.filter((c, i) => c.kvVersion === 1 && (plan.routed[i] ?? []).length > 0).map((c) => c.mount),
    ),
  ];
  if (kv1.length > 0)
    out.push(
      `Note: ${kv1.join(', ')} ${kv1.length === 1 ? 'is' : 'are'} KV v1 (no versions): reconcile cannot see changes there; only the change feed restarts for them.`,
    );
  return out;
}

/** The planned targets, in a table with the secrets and keys each is restarted for. */
function targetsText(plan: Plan): string[] {
  const out = ['', `Targets: ${plan.targets.length}`];
  if (plan.targets.length > 0) {
    out.push(
      table(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'WORKLOAD', 'ROUTES', 'SECRETS', 'KEYS USED'],
        plan.targets.map((t) => [
          t.cluster,
          t.namespace || '-',
          t.kind,
          describeTarget(t),
          t.routes.join(','),
          t.secrets.map(secretLabel).join(', '),
          `${keysLabel(t)}${keysWouldSkip(t) === undefined ? '' : ' -> skip if at the version before'}`,
        ]),
      ),
    );
  }
  return out;
}

/** What was not planned, ignored or rejected, each in a table of its own when there is any. */
function leftOutText(parsed: ParseResult, plan: Plan): string[] {
  const out: string[] = [];
  if (plan.problems.length > 0) {
    out.push(
      '',
      `Targets not planned: ${plan.problems.length}`,
      table(
        ['RECORD', 'ROUTE', 'PATH', 'PROBLEM'],
        plan.problems.map((p) => [p.record, p.route, p.path, p.error]),
      ),
    );
  }
  if (parsed.ignored.length > 0)
    out.push(
      '',
      `Ignored: ${parsed.ignored.length}`,
      table(
        ['RECORD', 'REASON', 'DETAIL'],
        parsed.ignored.map((i) => [i.record, i.reason, i.detail]),
      ),
    );
  if (parsed.rejected.length > 0)
    out.push(
      '',
      `Rejected: ${parsed.rejected.length}`,
      table(
        ['RECORD', 'ERROR'],
        parsed.rejected.map((r) => [r.record, r.error]),
      ),
    );
  return out;
}

export function planText(
  parsed: ParseResult,
  plan: Plan,
  sets: readonly ChangeSet[] = [],
  routes: readonly CompiledRoute[] = [],
): string {
  const out = [
    ...changesText(parsed, plan),
    ...targetsText(plan),
    ...controlsText(plan, routes),
    // Waves are shown where a route sets them (without, everything restarts at once, as the targets say).
    ...wavesText(
      sets.filter((s) => s.policy.waves !== undefined),
      plan,
    ),
    ...leftOutText(parsed, plan),
  ];
  return `${out.join('\n')}\n`;
}
