/**
 * Loads and checks a routing table once, at start-up: YAML -> zod -> cross-field checks -> a compiled table
 * whose routes are indexed for matching. Every error names the file, the line and the field.
 */
import { createHash } from 'node:crypto';
import { nearest } from '../kernel/nearest.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { KvVersion, Operation } from '../sources/secret-change.ts';
import {
  compilePattern,
  PatternError,
  PatternIndex,
  type CompiledPattern,
  type PatternSegment,
} from './path-pattern.ts';
import { NotificationEvents, type NotificationsSettings } from './notifications-schema.ts';
import {
  parseDuration,
  RoutingTableSchema,
  type Route,
  type RolloutSettings,
  type RoutingTableDocument,
} from './schema.ts';
import { type Target } from './target-schema.ts';
import { BUILTIN_PLACEHOLDERS, placeholders, stringsIn } from './template.ts';
import { fieldName, locator, schemaProblems, type FieldPath, type SchemaIssue } from './table-problems.ts';

import {
  boundAllows,
  consumersOf,
  DEFAULT_GATE_TIMEOUT_MS,
  DEFAULT_PROGRESSING_AFTER_MS,
  isConsumersTarget,
  isResourceTarget,
  isSyncTarget,
  RoutingTableError,
  targetName,
  type CompiledRoute,
  type CompiledTarget,
  type ConfigProblem,
  type NameBound,
  type NotificationPolicy,
  type RolloutPolicy,
  type RoutingTable,
} from './table-model.ts';

export * from './table-model.ts';

/** The schema allows only [a-z0-9.*-] here, so each compiles to one literal or wild segment, or is over its bounds. */
function compileNameBound(sources: readonly string[], report: (index: number, message: string) => void): NameBound {
  const globs: PatternSegment[] = [];
  sources.forEach((source, i) => {
    try {
      globs.push(compilePattern(source).segments[0] as PatternSegment);
    } catch (e) {
      if (!(e instanceof PatternError)) throw e;
      report(i, e.message);
    }
  });
  return { sources, globs };
}

/** Parses and checks a routing table; throws RoutingTableError listing every problem found. */
export function loadRoutingTable(text: string, file = 'routes.yaml'): RoutingTable {
  return parseRoutingTable(text, file).table;
}

/** Problems as a person reads the file: top to bottom, left to right (a stable sort keeps ties in found order). */
const inTextOrder = (problems: ConfigProblem[]): ConfigProblem[] =>
  problems.sort((a, b) => a.line - b.line || a.column - b.column);

/**
 * `loadRoutingTable`, also returning the checked document (the schema's output, plain JSON): what `package`
 * compiles into the table the functions load (lib/routing/compiled-table.ts).
 */
export function parseRoutingTable(
  text: string,
  file = 'routes.yaml',
): { document: RoutingTableDocument; table: RoutingTable } {
  const { doc, at, yamlProblems } = locator(text, file);
  if (doc.errors.length > 0) throw new RoutingTableError(yamlProblems());
  const data: unknown = doc.toJS();
  const parsed = RoutingTableSchema.safeParse(data);
  if (!parsed.success) {
    const issues = parsed.error.issues as unknown as SchemaIssue[];
    throw new RoutingTableError(inTextOrder(schemaProblems(issues, RoutingTableSchema, data).map(at)));
  }
  const problems: ConfigProblem[] = [];
  const table = compile(parsed.data, file, (path, message) => problems.push(at({ path: [...path], message })));
  if (problems.length > 0) throw new RoutingTableError(inTextOrder(problems));
  return { document: parsed.data, table };
}

/**
 * The table of a document already checked (by `parseRoutingTable`, when it was compiled): the same compilation,
 * without YAML or the schema. A problem found anyway is reported by field, without a line (there is no YAML).
 */
export function compileCheckedDocument(document: RoutingTableDocument, file: string): RoutingTable {
  const problems: ConfigProblem[] = [];
  const table = compile(
    document,
    file,
    (path, message) => problems.push({ file, line: 0, column: 0, field: fieldName(path), message }),
    true,
  );
  if (problems.length > 0) throw new RoutingTableError(problems);
  return table;
}

function selectClusters(
  doc: RoutingTableDocument,
  selector: Target['clusters'],
  report: (message: string) => void,
): string[] {
  if (Array.isArray(selector)) {
    for (const name of selector) {
      if (name in doc.clusters) continue;
      const guess = nearest(name, Object.keys(doc.clusters));
      const defined = Object.keys(doc.clusters).sort().join(', ') || 'none';
      report(
        `unknown cluster "${name}"${guess === undefined ? '' : ` (did you mean "${guess}"?)`}; defined: ${defined}`,
      );
    }
    return [...new Set(selector)].filter((n) => n in doc.clusters).sort();
  }
  const names = Object.entries(doc.clusters)
    .filter(([, c]) => Object.entries(selector).every(([k, v]) => c.labels[k] === v))
    .map(([n]) => n)
    .sort();
  if (names.length === 0) report(`the label selector ${JSON.stringify(selector)} selects no cluster`);
  return names;
}

/** Every key of a JSON-like value, with the path to it. */
function* keysIn(value: unknown, path: PropertyKey[] = []): Generator<{ key: string; path: PropertyKey[] }> {
  if (Array.isArray(value)) for (const [i, v] of value.entries()) yield* keysIn(v, [...path, i]);
  else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      yield { key: k, path: [...path, k] };
      yield* keysIn(v, [...path, k]);
    }
  }
}

/** Placeholders a target uses: captures only in workload fields; captures and built-ins in resource targets. */
function targetTemplates(target: Target): Array<{ field: string[]; text: string; builtins: boolean }> {
  if (isResourceTarget(target)) {
    const r = target.resource;
    return [
      { field: ['resource', 'name'], text: r.name, builtins: true },
      ...(r.namespace !== undefined ? [{ field: ['resource', 'namespace'], text: r.namespace, builtins: true }] : []),
      ...[...stringsIn(target.patch)].map((text) => ({ field: ['patch'], text, builtins: true })),
    ];
  }
  if (isSyncTarget(target)) {
    return [
      { field: ['namespace'], text: target.namespace, builtins: false },
      { field: ['sync', 'name'], text: target.sync.name, builtins: false },
    ];
  }
  if (isConsumersTarget(target)) {
    const { field, name } = consumersOf(target);
    return [
      { field: ['namespace'], text: target.namespace, builtins: false },
      { field: ['consumers', field], text: name, builtins: false },
    ];
  }
  return [
    { field: ['namespace'], text: target.namespace, builtins: false },
    ...(target.name !== undefined ? [{ field: ['name'], text: target.name, builtins: false }] : []),
    ...(target.selector !== undefined ? [{ field: ['selector'], text: target.selector, builtins: false }] : []),
  ];
}

/**
 * The table of a document. `checked`: the document passed these checks when it was compiled (`package`), so only
 * what the table is made of is built — the checks cost more than the building (cold start, 10,000 routes).
 */
function compile(
  doc: RoutingTableDocument,
  file: string,
  report: (path: FieldPath, message: string) => void,
  checked = false,
): RoutingTable {
  const routes: CompiledRoute[] = [];
  const index = new Map<string, PatternIndex>();
  const seenNames = new Map<string, number>();
  const builtins = new Set<string>(BUILTIN_PLACEHOLDERS);
  // Read only, and most routes take the same operations: one set for each combination.
  const operationSets = new Map<string, ReadonlySet<Operation>>();
  // Most routes name the same few cluster lists or selectors: each is resolved once.
  const selected = new Map<string, string[]>();
  const clustersOf = (selector: Target['clusters'], reportTo: (message: string) => void): string[] => {
    if (!checked) return selectClusters(doc, selector, reportTo);
    const key = JSON.stringify(selector);
    let names = selected.get(key);
    if (!names) selected.set(key, (names = selectClusters(doc, selector, reportTo)));
    return [...names];
  };

  // The top-level waves are checked once, where they are written; routes without their own reuse them.
  const defaultWaves =
    doc.rollout?.waves === undefined
      ? undefined
      : compileWaves(doc, doc.rollout.waves, (path, message) => report(['rollout', 'waves', ...path], message));
  let topPolicy: RolloutPolicy | undefined;
  /** Each sink name's one definition, with where it was made: the top level, then the routes in order. */
  const sinkDefinitions = new Map<string, { sink: unknown; where: string }>(
    Object.entries(doc.notifications?.sinks ?? {}).map(([n, sink]) => [n, { sink, where: 'at the top level' }]),
  );
  doc.routes.forEach((route: Route, r) => {
    const where = ['routes', r];
    if (!checked) {
      const first = seenNames.get(route.name);
      if (first !== undefined)
        report([...where, 'name'], `duplicate route name "${route.name}" (first at routes[${first}])`);
      else seenNames.set(route.name, r);
    }

    let pattern: CompiledPattern;
    try {
      pattern = compilePattern(
        route.match.path.startsWith('/') ? route.match.path.replace(/^\/+/, '') : route.match.path,
      );
    } catch (e) {
      report([...where, 'match', 'path'], e instanceof PatternError ? e.message : String(e));
      return;
    }
    if (!checked)
      for (const name of pattern.captures)
        if (builtins.has(name))
          report([...where, 'match', 'path'], `{${name}} is a built-in placeholder; name the capture differently`);

    const used = new Set<string>();
    const targets: CompiledTarget[] = route.targets.map((target, t) => {
      const twhere = [...where, 'targets', t];
      if (checked) {
        const built: CompiledTarget = {
          target,
          clusters: clustersOf(target.clusters, (m) => report([...twhere, 'clusters'], m)),
        };
        if (target.namespaces !== undefined)
          built.namespaces = compileNameBound(target.namespaces, (i, m) => report([...twhere, 'namespaces', i], m));
        if (target.names !== undefined)
          built.names = compileNameBound(target.names, (i, m) => report([...twhere, 'names', i], m));
        return built;
      }
      for (const { field, text, builtins: allowBuiltins } of targetTemplates(target)) {
        for (const name of placeholders(text)) {
          if (pattern.captures.includes(name)) used.add(name);
          else if (!(allowBuiltins && builtins.has(name))) {
            report(
              [...twhere, ...field],
              `undefined capture {${name}}: the path "${pattern.source}" captures ${pattern.captures.map((c) => `{${c}}`).join(', ') || 'nothing'}`,
            );
          }
        }
      }
      if (isResourceTarget(target)) {
        // A value from a path (or a built-in such as {path}) may fill a field, never choose which field is written.
        for (const { key, path } of keysIn(target.patch)) {
          if (placeholders(key).length > 0)
            report(
              [...twhere, 'patch', ...path],
              `placeholder in the patch key ${JSON.stringify(key)}: placeholders may only appear in values, so a path can never choose which field is written`,
            );
        }
      }
      const compiled: CompiledTarget = {
        target,
        clusters: selectClusters(doc, target.clusters, (m) => report([...twhere, 'clusters'], m)),
      };
      const renderedNamespace = isResourceTarget(target) ? target.resource.namespace : target.namespace;
      if (
        target.namespaces === undefined &&
        renderedNamespace !== undefined &&
        placeholders(renderedNamespace).length > 0
      ) {
        // Without a bound, a path such as secret/kube-system/... would reach kube-system.
        report(
          [...twhere, ...(isResourceTarget(target) ? ['resource', 'namespace'] : ['namespace'])],
          `the namespace "${renderedNamespace}" is rendered from the path: list the namespaces it may reach in namespaces: [names or globs such as team-*]`,
        );
      }
      if (target.namespaces !== undefined) {
        compiled.namespaces = compileNameBound(target.namespaces, (i, m) => report([...twhere, 'namespaces', i], m));
        const namespace = isResourceTarget(target) ? target.resource.namespace : target.namespace;
        if (namespace === undefined)
          report(
            [...twhere, 'namespaces'],
            'the resource has no namespace (cluster-scoped), so namespaces bounds nothing; remove it',
          );
        else if (placeholders(namespace).length === 0 && !boundAllows(compiled.namespaces, namespace)) {
          report(
            [...twhere, 'namespaces'],
            `the target's namespace "${namespace}" is outside its own namespaces: ${target.namespaces.join(', ')}`,
          );
        }
      }
      const name = targetName(target);
      if (target.names === undefined && name !== undefined && placeholders(name.template).length > 0) {
        // Without a bound, whoever may write secret/payments/<x> would restart any workload of the namespace named <x>.
        report(
          [...twhere, ...name.field],
          `the name "${name.template}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]`,
        );
      }
      if (target.names !== undefined) {
        compiled.names = compileNameBound(target.names, (i, m) => report([...twhere, 'names', i], m));
        if (name === undefined)
          report(
            [...twhere, 'names'],
            'the target finds its workloads by selector or annotation, so names bounds nothing; remove it',
          );
        else if (placeholders(name.template).length === 0 && !boundAllows(compiled.names, name.template)) {
          report(
            [...twhere, 'names'],
            `the target's name "${name.template}" is outside its own names: ${target.names.join(', ')}`,
          );
        }
      }
      return compiled;
    });
    if (!checked)
      for (const name of pattern.captures)
        if (!used.has(name))
          report(
            [...where, 'match', 'path'],
            `unused capture {${name}}: no target uses it (use * to match without capturing)`,
          );

    const namespace = route.match.namespace === undefined ? '' : route.match.namespace.replace(/^\/+|\/+$/g, '');
    let nsIndex = index.get(namespace);
    if (!nsIndex) index.set(namespace, (nsIndex = new PatternIndex()));
    nsIndex.add(routes.length, pattern);
    const timeout = route.rollout?.timeout === undefined ? undefined : parseDuration(route.rollout.timeout);
    // A route without its own `rollout` has the top-level policy: one object for all of them (read only, like `waves`).
    const policy =
      route.rollout === undefined
        ? (topPolicy ??= compilePolicy(doc, doc.rollout, undefined, () => undefined, defaultWaves))
        : compilePolicy(
            doc,
            doc.rollout,
            route.rollout,
            (path, message) => report([...where, 'rollout', ...path], message),
            defaultWaves,
          );
    const opsKey = route.match.operations.join(',');
    let operations = operationSets.get(opsKey);
    if (!operations) operationSets.set(opsKey, (operations = new Set(route.match.operations)));
    // Deliveries name their sink, so a sink name is one sink across the table: another definition under a name
    // already taken would send every route's notifications of that name to one of the two.
    for (const [sinkName, sink] of Object.entries(route.notifications?.sinks ?? {})) {
      const earlier = sinkDefinitions.get(sinkName);
      if (earlier !== undefined && JSON.stringify(earlier.sink) !== JSON.stringify(sink)) {
        report(
          [...where, 'notifications', 'sinks', sinkName],
          `the sink name "${sinkName}" is already defined ${earlier.where} with other settings: a sink name means one sink across the table, so give this one a name of its own`,
        );
      } else if (earlier === undefined)
        sinkDefinitions.set(sinkName, { sink, where: `by route ${JSON.stringify(route.name)}` });
    }
    const compiledRoute: CompiledRoute = {
      name: route.name,
      namespace,
      operations,
      pattern,
      targets,
      policy,
      notifications: notificationPolicy(doc.notifications, route.notifications),
    };
    if (timeout !== undefined) compiledRoute.rolloutTimeoutMs = timeout;
    if (route.rollout?.maxUnavailable) compiledRoute.maxUnavailable = route.rollout.maxUnavailable;
    routes.push(compiledRoute);
  });

  const mounts = new Map<string, KvVersion>();
  for (const [mount, version] of Object.entries(doc.vault.mounts))
    mounts.set(qualify('', mount.replace(/^\/+|\/+$/g, '')), version);
  const timeout = doc.rollout?.timeout === undefined ? undefined : parseDuration(doc.rollout.timeout);
  let hash: string | undefined;
  return {
    clusters: new Map(Object.entries(doc.clusters)),
    mounts,
    routes,
    index,
    file,
    ...(timeout === undefined ? {} : { rolloutTimeoutMs: timeout }),
    ...(doc.rollout?.maxUnavailable ? { maxUnavailable: doc.rollout.maxUnavailable } : {}),
    notifications: notificationPolicy(doc.notifications, undefined),
    allSinks: new Map([
      ...notificationPolicy(doc.notifications, undefined).sinks,
      ...routes.flatMap((r) => [...r.notifications.sinks]),
    ]),
    ...(doc.rotationStore ? { rotationStore: doc.rotationStore } : {}),
    get hash() {
      return (hash ??= createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 16));
    },
  };
}

/** The top-level notifications with a route's over them: sinks merged by name, events replaced, the limit overridden. */
function notificationPolicy(
  top: NotificationsSettings | undefined,
  own: NotificationsSettings | undefined,
): NotificationPolicy {
  const after = own?.progressingAfter ?? top?.progressingAfter;
  return {
    sinks: new Map(Object.entries({ ...top?.sinks, ...own?.sinks })),
    events: new Set(own?.events ?? top?.events ?? NotificationEvents),
    progressingAfterMs: (after === undefined ? undefined : parseDuration(after)) ?? DEFAULT_PROGRESSING_AFTER_MS,
  };
}

/** Cluster names per wave; a cluster already in an earlier wave is not repeated. */
function compileWaves(
  doc: RoutingTableDocument,
  waves: NonNullable<RolloutSettings['waves']>,
  report: (path: FieldPath, message: string) => void,
): string[][] {
  const seen = new Set<string>();
  return waves.map((wave, i) => {
    const names = selectClusters(doc, wave.clusters, (m) => report([i, 'clusters'], m)).filter((n) => !seen.has(n));
    for (const n of names) seen.add(n);
    return names;
  });
}

function compilePolicy(
  doc: RoutingTableDocument,
  top: RolloutSettings | undefined,
  own: RolloutSettings | undefined,
  report: (path: FieldPath, message: string) => void,
  defaultWaves: string[][] | undefined,
): RolloutPolicy {
  const ms = (t: string | undefined, fallback: number) => (t === undefined ? fallback : (parseDuration(t) ?? fallback));
  const gate = { ...top?.gate, ...own?.gate };
  const waves =
    own?.waves !== undefined
      ? compileWaves(doc, own.waves, (path, message) => report(['waves', ...path], message))
      : defaultWaves;
  return {
    ...(waves === undefined ? {} : { waves }),
    gate: {
      healthy: gate.healthy ?? true,
      timeoutMs: ms(gate.timeout, DEFAULT_GATE_TIMEOUT_MS),
      pauseMs: ms(gate.pause, 0),
    },
    onFailure: own?.onFailure ?? top?.onFailure ?? 'halt',
    settleMs: ms(own?.settle ?? top?.settle, 0),
  };
}
