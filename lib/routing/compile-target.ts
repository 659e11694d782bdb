/**
 * One target of a route, compiled for the routing table (lib/routing/routing-table.ts): its clusters and its compiled
 * namespace and name bounds, and, unless the document was checked when it was packaged, the checks of its
 * placeholders and of those bounds.
 */
import { compilePattern, PatternError, type CompiledPattern, type PatternSegment } from './path-pattern.ts';
import type { FieldPath } from './table-problems.ts';
import {
  boundAllows,
  consumersOf,
  isConsumersTarget,
  isResourceTarget,
  isSyncTarget,
  targetName,
  type CompiledTarget,
  type NameBound,
} from './table-model.ts';
import type { ResourceTarget, Target } from './target-schema.ts';
import { placeholders, stringsIn } from './template.ts';

/** What compiling one target needs of its route and its table. */
export interface TargetContext {
  /** The route's path pattern: the captures a target may use. */
  readonly pattern: CompiledPattern;
  readonly builtins: ReadonlySet<string>;
  /** The captures the route's targets used so far, added to here (the route reports those none used). */
  readonly used: Set<string>;
  readonly clustersOf: (selector: Target['clusters'], report: (message: string) => void) => string[];
  /** Where a problem goes, by its path from the target. */
  readonly report: (path: FieldPath, message: string) => void;
  /** The document passed these checks when it was compiled (`package`): only build. */
  readonly checked: boolean;
}

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
 * Every placeholder of the target is a capture of the path (or, where allowed, a built-in); the captures used noted.
 */
function checkPlaceholders(target: Target, ctx: TargetContext): void {
  const { pattern } = ctx;
  for (const { field, text, builtins: allowBuiltins } of targetTemplates(target)) {
    for (const name of placeholders(text)) {
      if (pattern.captures.includes(name)) ctx.used.add(name);
      else if (!(allowBuiltins && ctx.builtins.has(name))) {
        ctx.report(
          field,
          `undefined capture {${name}}: the path "${pattern.source}" captures ${pattern.captures.map((c) => `{${c}}`).join(', ') || 'nothing'}`,
        );
      }
    }
  }
}

/** A value from a path (or a built-in such as {path}) may fill a field, never choose which field is written. */
function checkPatchKeys(target: ResourceTarget, ctx: TargetContext): void {
  for (const { key, path } of keysIn(target.patch)) {
    if (placeholders(key).length > 0)
      ctx.report(
        ['patch', ...path],
        `placeholder in the patch key ${JSON.stringify(key)}: placeholders may only appear in values, so a path can never choose which field is written`,
      );
  }
}

/**
 * A namespace rendered from the path needs `namespaces`; a bound must bound something, and the target's own namespace.
 */
function checkNamespaceBound(target: Target, compiled: CompiledTarget, ctx: TargetContext): void {
  const namespace = isResourceTarget(target) ? target.resource.namespace : target.namespace;
  if (target.namespaces === undefined && namespace !== undefined && placeholders(namespace).length > 0) {
    // Without a bound, a path such as secret/kube-system/... would reach kube-system.
    ctx.report(
      isResourceTarget(target) ? ['resource', 'namespace'] : ['namespace'],
      `the namespace "${namespace}" is rendered from the path: list the namespaces it may reach in namespaces: [names or globs such as team-*]`,
    );
  }
  if (target.namespaces === undefined) return;
  compiled.namespaces = compileNameBound(target.namespaces, (i, m) => ctx.report(['namespaces', i], m));
  if (namespace === undefined)
    ctx.report(
      ['namespaces'],
      'the resource has no namespace (cluster-scoped), so namespaces bounds nothing; remove it',
    );
  else if (placeholders(namespace).length === 0 && !boundAllows(compiled.namespaces, namespace)) {
    ctx.report(
      ['namespaces'],
      `the target's namespace "${namespace}" is outside its own namespaces: ${target.namespaces.join(', ')}`,
    );
  }
}

/** A name rendered from the path needs `names`; a bound must bound something, and the target's own name. */
function checkNameBound(target: Target, compiled: CompiledTarget, ctx: TargetContext): void {
  const name = targetName(target);
  if (target.names === undefined && name !== undefined && placeholders(name.template).length > 0) {
    // Without a bound, whoever may write secret/payments/<x> would restart any workload of the namespace named <x>.
    ctx.report(
      name.field,
      `the name "${name.template}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]`,
    );
  }
  if (target.names === undefined) return;
  compiled.names = compileNameBound(target.names, (i, m) => ctx.report(['names', i], m));
  if (name === undefined)
    ctx.report(
      ['names'],
      'the target finds its workloads by selector or annotation, so names bounds nothing; remove it',
    );
  else if (placeholders(name.template).length === 0 && !boundAllows(compiled.names, name.template)) {
    ctx.report(['names'], `the target's name "${name.template}" is outside its own names: ${target.names.join(', ')}`);
  }
}

/** One target, compiled; checked first unless the document was checked already. */
export function compileTarget(target: Target, ctx: TargetContext): CompiledTarget {
  if (ctx.checked) {
    const built: CompiledTarget = {
      target,
      clusters: ctx.clustersOf(target.clusters, (m) => ctx.report(['clusters'], m)),
    };
    if (target.namespaces !== undefined)
      built.namespaces = compileNameBound(target.namespaces, (i, m) => ctx.report(['namespaces', i], m));
    if (target.names !== undefined) built.names = compileNameBound(target.names, (i, m) => ctx.report(['names', i], m));
    return built;
  }
  checkPlaceholders(target, ctx);
  if (isResourceTarget(target)) checkPatchKeys(target, ctx);
  const compiled: CompiledTarget = {
    target,
    clusters: ctx.clustersOf(target.clusters, (m) => ctx.report(['clusters'], m)),
  };
  checkNamespaceBound(target, compiled, ctx);
  checkNameBound(target, compiled, ctx);
  return compiled;
}
