/**
 * Loads and checks a routing table once, at start-up: YAML -> zod -> cross-field checks -> a compiled table
 * whose routes are indexed for matching. Every error names the file, the line and the field.
 */
import { createHash } from 'node:crypto';
import { qualify } from '../sources/kv-mounts.ts';
import type { KvVersion, Operation } from '../sources/secret-change.ts';
import { compileTarget, type TargetContext } from './compile-target.ts';
import { BucketedPatternIndex, type RouteIndex } from './bucketed-index.ts';
import { CheckedRoute, patternSource, type CheckedBuild } from './checked-route.ts';
import { compilePattern, PatternError, PatternIndex, type CompiledPattern } from './path-pattern.ts';
import { compilePolicy, compileWaves, markNotifyRoutes, notificationPolicy } from './route-policy.ts';
import { parseDuration, RoutingTableSchema, type Route, type RoutingTableDocument } from './schema.ts';
import { selectClusters } from './select-clusters.ts';
import { BUILTIN_PLACEHOLDERS } from './template.ts';
import { fieldName, locator, schemaProblems, type FieldPath, type SchemaIssue } from './table-problems.ts';
import type { Target } from './target-schema.ts';

import {
  RoutingTableError,
  type CompiledRoute,
  type ConfigProblem,
  type NotificationPolicy,
  type RolloutPolicy,
  type RoutingTable,
} from './table-model.ts';

export * from './table-model.ts';

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
  const report = (path: FieldPath, message: string): never => {
    throw new RoutingTableError([{ file, line: 0, column: 0, field: fieldName(path), message }]);
  };
  const ctx = tableContext(document, report, true);
  let topNotifications: NotificationPolicy | undefined;
  const build: CheckedBuild = {
    doc: document,
    builtins: ctx.builtins,
    clustersOf: ctx.clustersOf,
    defaultWaves: ctx.defaultWaves,
    report,
    operationsOf: (route) => operationsOf(ctx, route),
    topPolicy: () =>
      (ctx.topPolicy ??= compilePolicy(document, document.rollout, undefined, () => undefined, ctx.defaultWaves)),
    topNotifications: () => (topNotifications ??= notificationPolicy(document.notifications, undefined)),
  };
  const index = new Map<string, BucketedPatternIndex>();
  const routes = document.routes.map((route, r) => {
    const namespace = namespaceOf(route);
    const compiled = new CheckedRoute(route, r, namespace, build);
    if (route.mode === 'notify') compiled.mode = 'notify';
    let nsIndex = index.get(namespace);
    if (!nsIndex) index.set(namespace, (nsIndex = new BucketedPatternIndex()));
    nsIndex.add(patternSource(route), compiled);
    return compiled;
  });
  return tableOf(document, file, routes, index);
}

/** A route's Vault namespace, without its slashes ('' for the root namespace). */
const namespaceOf = (route: Route): string =>
  route.match.namespace === undefined ? '' : route.match.namespace.replace(/^\/+|\/+$/g, '');

/** The route's operations: read only, so routes taking the same ones share one set. */
function operationsOf(ctx: TableContext, route: Route): ReadonlySet<Operation> {
  const key = route.match.operations.join(',');
  let operations = ctx.operationSets.get(key);
  if (!operations) ctx.operationSets.set(key, (operations = new Set(route.match.operations)));
  return operations;
}

/** What compiling the routes of one document shares: the document, where problems go, and what is built once. */
interface TableContext {
  readonly doc: RoutingTableDocument;
  readonly report: (path: FieldPath, message: string) => void;
  /** The document passed the checks when it was compiled (`package`): only build. */
  readonly checked: boolean;
  readonly builtins: ReadonlySet<string>;
  /** Read only, and most routes take the same operations: one set for each combination. */
  readonly operationSets: Map<string, ReadonlySet<Operation>>;
  readonly clustersOf: TargetContext['clustersOf'];
  /** The top-level waves, checked once, where they are written; routes without their own reuse them. */
  readonly defaultWaves: string[][] | undefined;
  /** The policy of every route without its own `rollout`, built for the first of them. */
  topPolicy: RolloutPolicy | undefined;
  /** Each sink name's one definition, with where it was made: the top level, then the routes in order. */
  readonly sinkDefinitions: Map<string, { sink: unknown; where: string }>;
  readonly seenNames: Map<string, number>;
  readonly index: Map<string, PatternIndex>;
  readonly routes: CompiledRoute[];
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
  const ctx = tableContext(doc, report, checked);
  doc.routes.forEach((route: Route, r) => compileRoute(ctx, route, r));
  markNotifyRoutes(ctx.routes, doc.routes);
  return tableOf(doc, file, ctx.routes, ctx.index);
}

function tableContext(
  doc: RoutingTableDocument,
  report: (path: FieldPath, message: string) => void,
  checked: boolean,
): TableContext {
  // Most routes name the same few cluster lists or selectors: each is resolved once.
  const selected = new Map<string, string[]>();
  const clustersOf = (selector: Target['clusters'], reportTo: (message: string) => void): string[] => {
    if (!checked) return selectClusters(doc, selector, reportTo);
    const key = JSON.stringify(selector);
    let names = selected.get(key);
    if (!names) selected.set(key, (names = selectClusters(doc, selector, reportTo)));
    return [...names];
  };
  return {
    doc,
    report,
    checked,
    builtins: new Set<string>(BUILTIN_PLACEHOLDERS),
    operationSets: new Map(),
    clustersOf,
    defaultWaves:
      doc.rollout?.waves === undefined
        ? undefined
        : compileWaves(doc, doc.rollout.waves, (path, message) => report(['rollout', 'waves', ...path], message)),
    topPolicy: undefined,
    sinkDefinitions: new Map(
      Object.entries(doc.notifications?.sinks ?? {}).map(([n, sink]) => [n, { sink, where: 'at the top level' }]),
    ),
    seenNames: new Map(),
    index: new Map(),
    routes: [],
  };
}

/** One route, checked unless the document was, compiled, indexed by its path pattern and added to the routes. */
function compileRoute(ctx: TableContext, route: Route, r: number): void {
  const { doc, report } = ctx;
  const where = ['routes', r];
  if (!ctx.checked) checkRouteName(ctx, route, r, where);
  const pattern = routePattern(ctx, route, where);
  if (pattern === undefined) return;
  const used = new Set<string>();
  const targets = route.targets.map((target, t) => {
    const twhere = [...where, 'targets', t];
    const targetContext: TargetContext = {
      pattern,
      builtins: ctx.builtins,
      used,
      clustersOf: ctx.clustersOf,
      report: (path, message) => report([...twhere, ...path], message),
      checked: ctx.checked,
    };
    return compileTarget(target, targetContext);
  });
  if (!ctx.checked)
    for (const name of pattern.captures)
      if (!used.has(name))
        report(
          [...where, 'match', 'path'],
          `unused capture {${name}}: no target uses it (use * to match without capturing)`,
        );

  const namespace = namespaceOf(route);
  let nsIndex = ctx.index.get(namespace);
  if (!nsIndex) ctx.index.set(namespace, (nsIndex = new PatternIndex()));
  nsIndex.add(ctx.routes.length, pattern);
  const timeout = route.rollout?.timeout === undefined ? undefined : parseDuration(route.rollout.timeout);
  // A route without its own `rollout` has the top-level policy: one object for all of them (read only, like `waves`).
  const policy =
    route.rollout === undefined
      ? (ctx.topPolicy ??= compilePolicy(doc, doc.rollout, undefined, () => undefined, ctx.defaultWaves))
      : compilePolicy(
          doc,
          doc.rollout,
          route.rollout,
          (path, message) => report([...where, 'rollout', ...path], message),
          ctx.defaultWaves,
        );
  const operations = operationsOf(ctx, route);
  checkSinkNames(ctx, route, where);
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
  ctx.routes.push(compiledRoute);
}

/** A route name is given once. */
function checkRouteName(ctx: TableContext, route: Route, r: number, where: FieldPath): void {
  const first = ctx.seenNames.get(route.name);
  if (first !== undefined)
    ctx.report([...where, 'name'], `duplicate route name "${route.name}" (first at routes[${first}])`);
  else ctx.seenNames.set(route.name, r);
}

/** The route's path pattern (a leading / dropped), or undefined when it does not compile (reported). */
function routePattern(ctx: TableContext, route: Route, where: FieldPath): CompiledPattern | undefined {
  let pattern: CompiledPattern;
  try {
    pattern = compilePattern(
      route.match.path.startsWith('/') ? route.match.path.replace(/^\/+/, '') : route.match.path,
    );
  } catch (e) {
    ctx.report([...where, 'match', 'path'], e instanceof PatternError ? e.message : String(e));
    return undefined;
  }
  if (!ctx.checked)
    for (const name of pattern.captures)
      if (ctx.builtins.has(name))
        ctx.report([...where, 'match', 'path'], `{${name}} is a built-in placeholder; name the capture differently`);
  return pattern;
}

/**
 * Deliveries name their sink, so a sink name is one sink across the table: another definition under a name already
 * taken would send every route's notifications of that name to one of the two.
 */
function checkSinkNames(ctx: TableContext, route: Route, where: FieldPath): void {
  for (const [sinkName, sink] of Object.entries(route.notifications?.sinks ?? {})) {
    const earlier = ctx.sinkDefinitions.get(sinkName);
    if (earlier !== undefined && JSON.stringify(earlier.sink) !== JSON.stringify(sink)) {
      ctx.report(
        [...where, 'notifications', 'sinks', sinkName],
        `the sink name "${sinkName}" is already defined ${earlier.where} with other settings: a sink name means one sink across the table, so give this one a name of its own`,
      );
    } else if (earlier === undefined)
      ctx.sinkDefinitions.set(sinkName, { sink, where: `by route ${JSON.stringify(route.name)}` });
  }
}

/** Every sink the document defines, at the top level or on a route (most routes define none). */
function allSinksOf(doc: RoutingTableDocument): RoutingTable['allSinks'] {
  const sinks = new Map(Object.entries(doc.notifications?.sinks ?? {}));
  for (const route of doc.routes)
    if (route.notifications?.sinks)
      for (const [name, sink] of Object.entries(route.notifications.sinks)) sinks.set(name, sink);
  return sinks;
}

/** The table of the compiled routes: the document's clusters, mounts and top-level settings, its hash when asked. */
function tableOf(
  doc: RoutingTableDocument,
  file: string,
  routes: CompiledRoute[],
  index: ReadonlyMap<string, RouteIndex>,
): RoutingTable {
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
    // From the document, not the routes' policies, which a checked table builds on first use. A sink name is one
    // sink across the table (checkSinkNames), so the order of definitions does not matter.
    allSinks: allSinksOf(doc),
    ...(doc.rotationStore ? { rotationStore: doc.rotationStore } : {}),
    get hash() {
      return (hash ??= createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 16));
    },
  };
}
