/**
 * The cluster names a target or a wave selects in a routing table document: a list of names (each must be defined), or
 * a label selector (it must select one at least).
 */
import { nearest } from '../kernel/nearest.ts';
import type { RoutingTableDocument } from './schema.ts';
import type { Target } from './target-schema.ts';

/** The clusters a selector selects, sorted; an unknown name or a selector selecting nothing is reported. */
export function selectClusters(
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
