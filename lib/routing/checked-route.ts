/**
 * A route of a table whose document was checked when it was compiled (`npm run package`): what a function loads at a
 * cold start. Its name, namespace and operations are read at once; its path pattern, targets, policy and
 * notifications are built the first time something reads them, with the same code as a YAML table's routes. A
 * function compiles what its paths reach (lib/routing/bucketed-index.ts), not every route of a big table; a problem
 * found then (the document was checked, so none is expected) throws RoutingTableError naming the field.
 */
import type { Operation } from '../sources/secret-change.ts';
import { compileTarget, type TargetContext } from './compile-target.ts';
import { compilePattern, type CompiledPattern } from './path-pattern.ts';
import { compilePolicy, notificationPolicy } from './route-policy.ts';
import { parseDuration, type MaxUnavailable, type Route, type RoutingTableDocument } from './schema.ts';
import type { FieldPath } from './table-problems.ts';
import type { CompiledRoute, CompiledTarget, NotificationPolicy, RolloutPolicy } from './table-model.ts';

/** What building a checked table's routes shares: built once, the first time a route needs it. */
export interface CheckedBuild {
  readonly doc: RoutingTableDocument;
  readonly builtins: ReadonlySet<string>;
  readonly clustersOf: TargetContext['clustersOf'];
  readonly defaultWaves: string[][] | undefined;
  /** Throws RoutingTableError: a checked document has no problem to collect. */
  readonly report: (path: FieldPath, message: string) => never;
  /** The route's operations, one set shared by the routes that take the same ones. */
  operationsOf(route: Route): ReadonlySet<Operation>;
  /** The policy of every route without its own `rollout`. */
  topPolicy(): RolloutPolicy;
  /** The notifications of every route without its own `notifications`. */
  topNotifications(): NotificationPolicy;
}

/** A route's path pattern as the index takes it: a leading / dropped. */
export const patternSource = (route: Route): string =>
  route.match.path.startsWith('/') ? route.match.path.replace(/^\/+/, '') : route.match.path;

interface Built {
  operations?: ReadonlySet<Operation>;
  pattern?: CompiledPattern;
  targets?: CompiledTarget[];
  policy?: RolloutPolicy;
  notifications?: NotificationPolicy;
}

export class CheckedRoute implements CompiledRoute {
  /** Its place in the table: the id the index reports it by. */
  readonly id: number;
  readonly name: string;
  readonly namespace: string;
  declare rolloutTimeoutMs?: number;
  declare maxUnavailable?: MaxUnavailable;
  declare mode?: 'notify';
  readonly #route: Route;
  readonly #build: CheckedBuild;
  /** What was built so far: one object, made at the first read (most routes of a big table are never read). */
  #built: Built | undefined;

  constructor(route: Route, id: number, namespace: string, build: CheckedBuild) {
    this.id = id;
    this.name = route.name;
    this.namespace = namespace;
    this.#route = route;
    this.#build = build;
    const timeout = route.rollout?.timeout === undefined ? undefined : parseDuration(route.rollout.timeout);
    if (timeout !== undefined) this.rolloutTimeoutMs = timeout;
    if (route.rollout?.maxUnavailable) this.maxUnavailable = route.rollout.maxUnavailable;
  }

  get operations(): ReadonlySet<Operation> {
    return ((this.#built ??= {}).operations ??= this.#build.operationsOf(this.#route));
  }

  get pattern(): CompiledPattern {
    return ((this.#built ??= {}).pattern ??= compilePattern(patternSource(this.#route)));
  }

  get targets(): CompiledTarget[] {
    const built = (this.#built ??= {});
    if (built.targets) return built.targets;
    const { builtins, clustersOf, report } = this.#build;
    const { pattern } = this;
    const used = new Set<string>();
    return (built.targets = this.#route.targets.map((target, t) =>
      compileTarget(target, {
        pattern,
        builtins,
        used,
        clustersOf,
        report: (path, message) => report(['routes', this.id, 'targets', t, ...path], message),
        checked: true,
      }),
    ));
  }

  get policy(): RolloutPolicy {
    const { doc, defaultWaves, report } = this.#build;
    const own = this.#route.rollout;
    return ((this.#built ??= {}).policy ??=
      own === undefined
        ? this.#build.topPolicy()
        : compilePolicy(
            doc,
            doc.rollout,
            own,
            (path, message) => report(['routes', this.id, 'rollout', ...path], message),
            defaultWaves,
          ));
  }

  get notifications(): NotificationPolicy {
    const own = this.#route.notifications;
    return ((this.#built ??= {}).notifications ??=
      own === undefined ? this.#build.topNotifications() : notificationPolicy(this.#build.doc.notifications, own));
  }
}
