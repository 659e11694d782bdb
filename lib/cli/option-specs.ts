/**
 * The flags several commands share (the routing table, the input, dry-run, Vault's address, clusters, metrics) and
 * the bounds they use, for the command specs (specs.ts, service-specs.ts). Data only, like the specs.
 */
/** lib/sources/parse.ts InputFormats (test/unit/cli/specs checks they agree; not imported, to keep this file light). */
export const INPUT_FORMATS = ['auto', 'audit', 'event', 'cloudwatch', 'fluent-bit', 'vector'] as const;
/** lib/runtime/local-worker.ts MAX_LOOPS. */
export const MAX_LOOPS = 32;
export const DAY_MS = 86_400_000;
export const PORT = { type: 'integer', min: 0, max: 65_535 } as const;

export const routes = {
  name: 'routes',
  type: 'string',
  arg: 'FILE',
  env: 'VAULT_ROLLOUT_ROUTES',
  summary: 'the routing table',
} as const;
export const input = {
  name: 'input',
  type: 'string',
  arg: 'FILE',
  default: '-',
  summary:
    'the change records (audit log lines, events, CloudWatch, Fluent Bit or Vector records); - is standard input',
} as const;
export const format = {
  name: 'format',
  type: 'enum',
  choices: INPUT_FORMATS,
  default: 'auto',
  summary: 'the input format',
} as const;
export const dryRun = {
  name: 'dry-run',
  type: 'boolean',
  default: false,
  summary: 'change nothing (server-side dry-run of each patch)',
} as const;
export const vaultAddr = {
  name: 'vault-addr',
  type: 'string',
  arg: 'URL',
  env: 'VAULT_ADDR',
  summary: "Vault's address, http(s)://HOST:PORT",
} as const;
export const vaultRedirectHosts = {
  name: 'vault-redirect-hosts',
  type: 'list',
  arg: 'HOST,…',
  summary: "Vault's other nodes a standby's redirect may name (else the token goes to the --vault-addr host only)",
} as const;
export const clusterKubeconfig = {
  name: 'cluster-kubeconfig',
  type: 'list',
  arg: 'NAME=PATH[#CONTEXT]',
  summary:
    "reach cluster NAME with this kubeconfig file (and context) instead of the routing table's credentials, as kubectl --kubeconfig/--context; repeat per cluster",
} as const;
export const cluster = {
  name: 'cluster',
  type: 'list',
  arg: 'NAME',
  summary: 'only these clusters of the routing table',
} as const;
export const metricsPort = {
  name: 'metrics-port',
  ...PORT,
  arg: 'PORT',
  summary: 'serve GET /metrics (Prometheus, no authentication) on this port',
} as const;
export const metricsHost = {
  name: 'metrics-host',
  type: 'string',
  arg: 'HOST',
  default: '127.0.0.1',
  summary: 'the address of the metrics listener',
} as const;
export const unauthenticated = {
  name: 'i-understand-unauthenticated-access',
  type: 'boolean',
  default: false,
  summary: 'allow an unauthenticated listener on an address other hosts reach',
} as const;
export const TABLE_JSON_YAML = ['table', 'json', 'yaml'] as const;
