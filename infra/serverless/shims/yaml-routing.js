// Bundle-time stand-in for the `yaml` package where the routing table's YAML loader imports it
// (lib/routing/table-problems.ts), inside the Lambda bundles (see esbuild-plugins.js).
//
// The functions load the compiled routing table `npm run package` writes (lib/routing/compiled-table.ts): JSON, checked
// at packaging, with no YAML parser at a cold start. The intake functions (http, logs) need YAML for nothing else, so
// the parser (about 120 KB minified) stays out of their bundles; the worker still bundles it for kubeconfigs. A YAML
// table handed to a packaged function fails loudly here instead of being parsed.
const refuse = () => {
  throw new Error(
    'the Lambda functions load the compiled routing table (VAULT_ROLLOUT_ROUTES=infra/routes/<stage>.compiled.json, written by npm run package), not YAML',
  );
};

export const parseDocument = refuse;
export const isMap = refuse;
export const isScalar = refuse;
export const isSeq = refuse;
export class LineCounter {
  constructor() {
    refuse();
  }
}
