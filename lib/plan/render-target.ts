/**
 * A route's target templates rendered from a change's captures (lib/plan/planner.ts): namespaces and names that
 * must be Kubernetes names inside the target's bounds, and selectors whose placeholders must be label values.
 */
import type { Captures } from '../routing/path-pattern.ts';
import { boundAllows, type NameBound } from '../routing/routing-table.ts';
import { placeholders, render } from '../routing/template.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A Kubernetes label value: what a capture may be inside a selector, so it is data there, never selector syntax. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

export type Rendered = string | { error: string };

function render1(template: string, values: Captures, kind: 'namespace' | 'name'): Rendered {
  const out = render(template, values);
  const ok = kind === 'namespace' ? DNS_LABEL.test(out) : DNS_SUBDOMAIN.test(out);
  return ok
    ? out
    : { error: `${kind} ${JSON.stringify(out.slice(0, 80))} rendered from the path is not a valid Kubernetes ${kind}` };
}

/** A namespace, rendered, and inside the target's bound when it has one. */
export function renderNamespace(template: string, values: Captures, bound: NameBound | undefined): Rendered {
  const out = render1(template, values, 'namespace');
  if (typeof out !== 'string' || bound === undefined || boundAllows(bound, out)) return out;
  return {
    error: `namespace ${JSON.stringify(out)} rendered from the path is outside the target's namespaces (${bound.sources.join(', ')})`,
  };
}

/** An object name, rendered, and inside the target's `names` when it has them. */
export function renderName(template: string, values: Captures, bound: NameBound | undefined): Rendered {
  const out = render1(template, values, 'name');
  if (typeof out !== 'string' || bound === undefined || boundAllows(bound, out)) return out;
  return {
    error: `name ${JSON.stringify(out.slice(0, 80))} rendered from the path is outside the target's names (${bound.sources.join(', ')})`,
  };
}

/** A selector whose every placeholder is filled with a valid label value (`app in ({apps})` stays one value). */
export function renderSelector(template: string, values: Captures): Rendered {
  for (const name of placeholders(template)) {
    const value = values[name];
    if (value !== undefined && !LABEL_VALUE.test(value)) {
      return {
        error: `{${name}} = ${JSON.stringify(value.slice(0, 80))} from the path is not a valid label value, so it cannot go into the selector`,
      };
    }
  }
  return render(template, values);
}
