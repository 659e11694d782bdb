/**
 * A Kubernetes label selector (the `?labelSelector=` syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
 * `a`, `!a`, comma-joined), matched here against labels already listed, so `status` answers from one LIST per kind
 * and namespace instead of one per selector. Same meaning as the API server's (k8s.io/apimachinery labels.Parse);
 * a selector this parser does not understand matches nothing and says why.
 */

type Requirement =
  | { key: string; op: 'in'; values: Set<string> }
  | { key: string; op: 'notin'; values: Set<string> }
  | { key: string; op: 'exists' }
  | { key: string; op: 'absent' };

export type LabelSelector = { requirements: Requirement[] } | { error: string };

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Splits on commas outside parentheses. */
function clauses(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  out.push(selector.slice(start));
  return out.map((s) => s.trim()).filter((s) => s !== '');
}

export function parseLabelSelector(selector: string): LabelSelector {
  if (selector.length > 4096) return { error: 'the selector is longer than 4096 characters' };
  const requirements: Requirement[] = [];
  for (const clause of clauses(selector)) {
    let m: RegExpExecArray | null;
    if ((m = /^!\s*(\S+)$/.exec(clause))) {
      requirements.push({ key: m[1] ?? '', op: 'absent' });
    } else if ((m = /^(\S+?)\s*(==|!=|=)\s*(\S*)$/.exec(clause))) {
      const values = new Set([m[3] ?? '']);
      requirements.push(
        m[2] === '!=' ? { key: m[1] ?? '', op: 'notin', values } : { key: m[1] ?? '', op: 'in', values },
      );
    } else if ((m = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(clause))) {
      const values = new Set((m[3] ?? '').split(',').map((v) => v.trim()));
      requirements.push(
        m[2] === 'in' ? { key: m[1] ?? '', op: 'in', values } : { key: m[1] ?? '', op: 'notin', values },
      );
    } else if (/^\S+$/.test(clause)) {
      requirements.push({ key: clause, op: 'exists' });
    } else return { error: `cannot read the selector clause ${JSON.stringify(clause.slice(0, 80))}` };
    const last = requirements.at(-1) as Requirement;
    if (!KEY.test(last.key)) return { error: `${JSON.stringify(last.key.slice(0, 80))} is not a label key` };
    if ('values' in last && [...last.values].some((v) => !VALUE.test(v)))
      return { error: `a value of ${JSON.stringify(last.key)} is not a label value` };
  }
  return { requirements };
}

export function selectorMatches(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if ('error' in selector) return false;
  const l = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    switch (r.op) {
      case 'in':
        return has && r.values.has(l[r.key] as string);
      case 'notin':
        return !has || !r.values.has(l[r.key] as string);
      case 'exists':
        return has;
      case 'absent':
        return !has;
    }
  });
}
