/**
 * Every command's spec: its flags (type, default, environment variable, bounds), arguments and exit codes. The one
 * source of the parsing (spec.ts), `--help`, the shell completions and the CLI reference. Data only: main.ts reads it
 * before any command's module is imported (serve never loads what reconcile needs).
 */
import type { CommandSpec, OptionSpec } from './spec.ts';
import {
  DAY_MS,
  routes,
  input,
  format,
  dryRun,
  vaultAddr,
  vaultRedirectHosts,
  clusterKubeconfig,
  cluster,
  TABLE_JSON_YAML,
} from './option-specs.ts';
import { relay, serve, worker } from './service-specs.ts';

const planExits = [
  [0, 'every record was understood'],
  [1, 'the routing table or the input cannot be read or is invalid'],
  [2, 'some records could not be parsed (the others are still planned)'],
] as const;

export const plan = {
  name: 'plan',
  summary: 'Show which workloads a set of Vault change records would restart',
  description:
    'Reads Vault change records (standard input by default: pipe a file or use --input FILE) and prints, per record, the workloads the routing table restarts for it. Nothing is changed.',
  options: [routes, input, format, clusterKubeconfig],
  outputs: TABLE_JSON_YAML,
  exits: planExits,
} as const satisfies CommandSpec;

export const apply = {
  name: 'apply',
  summary: 'Plan, then restart the targets in every cluster',
  description:
    "Plans as plan does, then restarts each target (server-side dry-run with --dry-run) and prints a result per workload: restarted, unchanged, skipped, dry-run or failed with its reason. With --wait (the default on a terminal, with --timeout, and when the table has rollout.waves) follows each rollout to complete, failed or timeout (deadline: --timeout, else the routing table's, else 10m), live on stderr. Waves run one after another here; a failed gate halts the rotation (see halts); a gate with approval waits for vault-rollout approve (printing the command) up to its timeout. --no-wait refuses a rotation with waves.",
  options: [
    routes,
    input,
    format,
    dryRun,
    clusterKubeconfig,
    {
      name: 'wait',
      type: 'boolean',
      negatable: true,
      summary: 'follow each rollout to its end (--no-wait: only restart)',
    },
    { name: 'timeout', type: 'duration', min: 1000, max: DAY_MS, summary: 'how long to follow the rollouts' },
  ],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'all is well'],
    [1, "the routing table or the input cannot be read or is invalid, or the table's rotationStore is not this store"],
    [2, 'some records could not be parsed'],
    [3, 'a restart failed, or a halt refused the rotation'],
    [4, 'a rollout failed or timed out, or a gate halted'],
    [5, 'a wave waited for approval (rollout.gate.approval) past its gate timeout; approve it, then run apply again'],
  ],
} as const satisfies CommandSpec;

export const doctor = {
  name: 'doctor',
  summary: 'Check credentials, reachability and permissions in every cluster',
  description:
    'Per cluster: credentials, reachability and version, who we are, and whether we may get, list, watch and patch each targeted kind in each targeted namespace and create events; whether the admission policy (admission-policy) is installed, enforced and covers the table.',
  options: [routes, clusterKubeconfig],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'no problem'],
    [1, 'a problem (each with what to fix)'],
  ],
} as const satisfies CommandSpec;

export const importSpec = {
  name: 'import',
  summary: 'Write a routing table from the VSO, ESO and Reloader objects of the clusters',
  description:
    'Reads, with list permission only, the VaultStaticSecrets, ExternalSecrets (Vault stores) and Reloader annotations of the clusters and prints (or writes to --file) a routing table doing the same job in all of them; what cannot be mapped is listed on stderr and as comments.',
  options: [
    {
      name: 'cluster',
      type: 'list',
      arg: 'NAME=KUBECONFIG',
      summary: 'a cluster to read, with its kubeconfig (at least one)',
    },
    { name: 'label', type: 'list', arg: 'NAME:KEY=VALUE', summary: 'a label of a cluster in the table written' },
    {
      name: 'from',
      type: 'list',
      arg: 'vso,eso,reloader',
      default: ['vso', 'eso', 'reloader'],
      summary: 'what to read',
    },
    { name: 'file', type: 'string', arg: 'FILE', summary: 'write the table to FILE instead of standard output' },
    {
      name: 'vault-addr',
      type: 'string',
      arg: 'URL',
      summary: 'the Vault server of the table, when the clusters read several',
    },
    { name: 'namespace', short: 'n', type: 'list', arg: 'NS', summary: 'only these Kubernetes namespaces' },
    {
      name: 'vso-operator-namespace',
      type: 'string',
      arg: 'NS',
      default: 'vault-secrets-operator-system',
      summary: "the Kubernetes namespace of the Vault Secrets Operator's defaults",
    },
  ],
  outputs: ['yaml', 'json', 'table'],
  exits: [
    [0, 'the table was written and validates'],
    [
      1,
      'a cluster cannot be read, two objects read one mount with different KV versions, or the table written does not validate',
    ],
  ],
} as const satisfies CommandSpec;

export const resetVersion = {
  name: 'reset-version',
  summary: "Repair a poisoned record: record Vault's current version on every target",
  description:
    "Records version N (Vault's current_version of the path) on every workload the path's routes target, replacing a higher recorded version. Each workload whose record changes restarts once.",
  options: [
    routes,
    { name: 'path', type: 'string', arg: 'MOUNT/KEY', summary: 'the secret' },
    { name: 'version', type: 'integer', min: 1, max: 2 ** 31 - 1, summary: "Vault's current_version of the path" },
    {
      name: 'vault-namespace',
      type: 'string',
      arg: 'NS',
      env: 'VAULT_NAMESPACE',
      default: '',
      summary: 'the Vault namespace of the path',
    },
    cluster,
    clusterKubeconfig,
    dryRun,
  ],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'every target recorded the version'],
    [1, 'no route targets the path, the routing table cannot be read, or its rotationStore is not this store'],
    [3, 'a target failed'],
    [4, 'a gate halted'],
  ],
  renamed: [
    { flag: '--namespace', use: '--vault-namespace VAULT-NS (--namespace/-n is always a Kubernetes namespace)' },
    { flag: '-n', use: '--vault-namespace VAULT-NS (--namespace/-n is always a Kubernetes namespace)' },
  ],
} as const satisfies CommandSpec;

export const status = {
  name: 'status',
  summary: 'May the old credential be revoked? Per path, cluster and workload',
  description:
    "Per routed path recorded in the clusters: Vault's current version (with --vault-addr or VAULT_ADDR), and per cluster and workload the recorded version, rollout state and pods on the new template; BEHIND, FAILED, HALTED, POISONED stand out. --wait polls until every consumer is current and complete (live on a terminal) or the timeout. -o html is the status page that serve --status-page serves; --file writes the output there (whole, by rename).",
  options: [
    routes,
    { name: 'path', type: 'string', arg: 'PATTERN', summary: 'only the paths this pattern matches' },
    cluster,
    clusterKubeconfig,
    vaultAddr,
    { name: 'vault-namespace', type: 'string', arg: 'NS', env: 'VAULT_NAMESPACE', summary: 'the Vault namespace' },
    { name: 'file', type: 'string', arg: 'FILE', summary: 'write the output to FILE instead of standard output' },
    { name: 'wait', type: 'boolean', default: false, summary: 'poll until every consumer is current and complete' },
    { name: 'timeout', type: 'duration', default: '15m', min: 1000, max: DAY_MS, summary: 'how long --wait waits' },
    { name: 'interval', type: 'duration', default: '2s', min: 500, max: 60_000, summary: 'how often --wait reads' },
    {
      name: 'safe-to-revoke',
      type: 'boolean',
      default: false,
      summary:
        'with a literal --path: print only the JSON answer (safe, consumers, pods on the recorded version and older) and exit 0 only when safe',
    },
  ],
  outputs: ['table', 'json', 'yaml', 'html'],
  exits: [
    [0, 'every consumer is current and complete (--safe-to-revoke: and no older pod runs)'],
    [1, 'not (or the routing table or Vault cannot be read)'],
  ],
} as const satisfies CommandSpec;

export const notify = {
  name: 'notify',
  summary: 'Send a sample notification to each sink of the routing table',
  description:
    "Sends a sample notification to each sink of the routing table's notifications (secrets from the environment) and reports per sink: sent, failed, or not usable.",
  args: [{ name: 'action', summary: 'test', required: true, choices: ['test'] }],
  options: [routes],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'every sink took the sample'],
    [1, 'a sink failed or is not usable, or the table has none'],
  ],
} as const satisfies CommandSpec;

export const halts = {
  name: 'halts',
  summary: "The rotations a wave's gate halted; clear one",
  description:
    'halts [list]: every halt (rotation, secrets, wave, the failing workload, why, what was not restarted), and the latest clears (who, from which host, when). halts clear ROTATION: resumes it; the next change or reconcile starts again from wave 1. The store keeps who cleared it (user, host, time); with --routes a RotationHaltCleared Event on the failing workload says so too. Store: VAULT_ROLLOUT_STATE_TABLE, VAULT_ROLLOUT_STATE_DB, else $XDG_STATE_HOME or ~/.local/state, /vault-rollout/rotations.sqlite.',
  args: [
    { name: 'action', summary: 'list (the default) or clear', choices: ['list', 'clear'] },
    { name: 'rotation', summary: 'the rotation key to clear' },
  ],
  options: [
    { ...routes, summary: "the routing table: clear records its Event in the failing workload's cluster" },
    clusterKubeconfig,
  ],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'listed, or cleared'],
    [1, 'no halt of that rotation'],
  ],
} as const satisfies CommandSpec;

export const approve = {
  name: 'approve',
  summary: 'Approve the next wave of a rotation waiting at an approval gate',
  description:
    'approve ROTATION [--wave N]: records in the rotation store who approved the waiting wave and when; the gate (serve, the Lambda worker, or an apply waiting in the foreground) then starts it at its next look. Only a wave that waits for approval (rollout.gate.approval) can be approved; without --wave, the one wave of the rotation that waits. approve --list: the waves waiting (rotation, wave, since when, secrets). Who: --by, else the operating-system user. Store: VAULT_ROLLOUT_STATE_TABLE, VAULT_ROLLOUT_STATE_DB, else $XDG_STATE_HOME or ~/.local/state, /vault-rollout/rotations.sqlite.',
  args: [{ name: 'rotation', summary: 'the rotation key that the approval request, status or approve --list shows' }],
  options: [
    {
      name: 'wave',
      type: 'integer',
      min: 2,
      max: 100,
      arg: 'N',
      summary: 'the waiting wave (1-based, as the request says)',
    },
    { name: 'list', type: 'boolean', default: false, summary: 'list the waves waiting for approval instead' },
    {
      name: 'by',
      type: 'string',
      arg: 'WHO',
      summary: 'who approves (1-128 characters; default: the operating-system user)',
    },
  ],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'approved (or already approved), or listed'],
    [1, 'no such rotation waits, or that wave does not wait for approval'],
    [64, 'no ROTATION (or ROTATION with --list), or a --by that is not a name'],
  ],
} as const satisfies CommandSpec;

export const reconcile = {
  name: 'reconcile',
  summary: "Restart what is behind Vault's current versions",
  description:
    "Expands every route against Vault's KV v2 metadata (never data/), compares each path's current version with what each workload records, and restarts what is behind through the queue (SQS with --queue-url, else worked here). Workloads whose pods started after the version was created are recorded, never restarted. Vault auth: VAULT_TOKEN[_FILE|_SSM], VAULT_ROLE_ID + VAULT_SECRET_ID (AppRole), or VAULT_AWS_ROLE.",
  options: [
    routes,
    dryRun,
    clusterKubeconfig,
    vaultAddr,
    vaultRedirectHosts,
    {
      name: 'queue-url',
      type: 'string',
      arg: 'URL',
      env: 'VAULT_ROLLOUT_QUEUE_URL',
      summary: 'send the restarts to this SQS queue (else worked here)',
    },
    { name: 'max-paths', type: 'integer', min: 1, max: 1_000_000, summary: 'the most paths to expand' },
  ],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'all is current, or was restarted'],
    [1, "a path, route or workload could not be read, or (worked here) the table's rotationStore is not this store"],
    [3, 'a restart failed'],
  ],
} as const satisfies CommandSpec;

export const validate = {
  name: 'validate',
  summary: 'Check a routing table',
  description:
    'Checks a routing table and prints every problem as file:line:column: field: message, in the order of the file (unknown fields with the field meant, missing fields, supported values). With -o json or yaml the verdict is a document on stdout either way: {file, ok, problems: [{line, column, field, message}]}.',
  args: [{ name: 'file', summary: 'the routing table', required: true }],
  options: [],
  outputs: TABLE_JSON_YAML,
  exits: [
    [0, 'the table is valid'],
    [1, 'problems (each listed)'],
  ],
} as const satisfies CommandSpec;

export const schema = {
  name: 'schema',
  summary: "Print the routing table's JSON Schema",
  description:
    "Prints the routing table's JSON Schema (infra/routes/routing-table.schema.json is this output), for editors.",
  options: [],
  outputs: ['json', 'yaml'],
  exits: [[0, 'printed']],
} as const satisfies CommandSpec;

export const admissionPolicy = {
  name: 'admission-policy',
  summary: 'Print the ValidatingAdmissionPolicy that bounds what vault-rollout may write',
  description:
    'Prints the ValidatingAdmissionPolicy (and binding) that lets the identity change only what a restart writes, only in the namespaces the routes target each kind in (a warning on stderr for a kind some target reaches in every namespace). infra/rbac/admission-policy.yaml is this output for infra/routes/example.yaml.',
  options: [
    routes,
    { name: 'user', type: 'list', arg: 'NAME', summary: 'the user to bound (default: the shipped identities)' },
    { name: 'group', type: 'list', arg: 'NAME', summary: 'the group to bound' },
  ],
  exits: [
    [0, 'printed'],
    [1, 'the routing table cannot be read'],
  ],
} as const satisfies CommandSpec;

export const completion = {
  name: 'completion',
  summary: 'Print a shell completion script',
  description:
    'Prints the completion script of bash, zsh or fish, e.g. `source <(vault-rollout completion bash)`, or save it where the shell loads completions.',
  args: [{ name: 'shell', summary: 'bash, zsh or fish', required: true, choices: ['bash', 'zsh', 'fish'] }],
  options: [],
  exits: [[0, 'printed']],
} as const satisfies CommandSpec;

/** Every command, in the order help lists them. */
export const COMMAND_SPECS: readonly CommandSpec[] = [
  plan,
  apply,
  doctor,
  importSpec,
  serve,
  worker,
  relay,
  resetVersion,
  status,
  notify,
  halts,
  approve,
  reconcile,
  validate,
  schema,
  admissionPolicy,
  completion,
];

export function commandSpec(name: string): CommandSpec | undefined {
  return COMMAND_SPECS.find((s) => s.name === name);
}

/** Options given by value only in specs (so a test can check each appears in the reference). */
export type { OptionSpec };
