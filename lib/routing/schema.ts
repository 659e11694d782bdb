/**
 * The routing table: which clusters exist and how to reach them, the KV version of each mount, and which
 * changed Vault paths restart which workloads. The zod schema is the single source; the JSON Schema that
 * editors use is generated from it (`npm run schema`).
 */
import { z } from 'zod';
import { DURATION_PATTERN, durationProblem } from '../kernel/duration.ts';
import { Operations } from '../sources/secret-change.ts';

export const WorkloadKinds = ['Deployment', 'StatefulSet', 'DaemonSet', 'Rollout', 'CronJob'] as const;
export type WorkloadKind = (typeof WorkloadKinds)[number];

const nonEmpty = z.string().min(1, 'must not be empty');

/**
 * Names that become IAM resource ARNs (lib/deploy/iam-from-routes.ts): `*` and `?` are wildcards there, so a name
 * holding one would grant every parameter, secret, cluster or role it happens to match. Refused, with the reason.
 */
const NO_IAM_WILDCARD = /^[^*?]*$/;
const IAM_WILDCARD_REASON =
  'must not contain * or ?: the IAM policy derived from the routing table would read it as a wildcard';
const iamName = (charset: RegExp, what: string) =>
  nonEmpty
    .refine((s) => charset.test(s) && NO_IAM_WILDCARD.test(s), {
      error: (issue) => (NO_IAM_WILDCARD.test(String(issue.input)) ? what : IAM_WILDCARD_REASON),
    })
    // One check with one reason (two would report a wildcard twice); editors still get the pattern.
    .meta({ pattern: charset.source });

/**
 * Opt-ins for kubeconfigs held on this machine (file, env, inline): what the kubeconfig's user may make
 * vault-rollout do. Not offered for SSM or Secrets Manager: whoever can write the parameter would choose the command
 * this process runs, or the file it sends as a token.
 */
const localKubeconfigOptions = {
  allowExec: z
    .boolean()
    .optional()
    .describe('grants nothing: the operator allows exec plugins per cluster with VAULT_ROLLOUT_ALLOW_EXEC'),
  allowTokenFile: z
    .boolean()
    .optional()
    .describe('grants nothing: the operator allows token files per cluster with VAULT_ROLLOUT_ALLOW_TOKEN_FILE'),
};

export const KubeconfigSourceSchema = z.union(
  [
    z.strictObject({
      file: nonEmpty.describe('path to a kubeconfig file, relative to the routing table'),
      ...localKubeconfigOptions,
    }),
    z.strictObject({
      env: nonEmpty.describe('environment variable holding the kubeconfig YAML'),
      ...localKubeconfigOptions,
    }),
    z.strictObject({ inline: nonEmpty.describe('the kubeconfig YAML itself'), ...localKubeconfigOptions }),
    z.strictObject({
      ssm: iamName(/^[A-Za-z0-9_.:/-]+$/, 'must be an SSM parameter name or ARN (letters, digits, _ . - /)').describe(
        'SSM Parameter Store SecureString name',
      ),
    }),
    z.strictObject({
      secretsManager: iamName(
        /^[A-Za-z0-9_.:/+=@-]+$/,
        'must be a Secrets Manager secret name or ARN (letters, digits, / _ + = . @ -)',
      ).describe('Secrets Manager secret id or ARN'),
    }),
  ],
  {
    error:
      'must be exactly one of { file }, { env }, { inline } (each with optional allowExec, allowTokenFile), { ssm } or { secretsManager }',
  },
);
export type KubeconfigSource = z.infer<typeof KubeconfigSourceSchema>;

export { parseDuration } from '../kernel/duration.ts';

/**
 * A duration of the one grammar the CLI takes too (lib/kernel/duration.ts), from `minMs` to `maxMs`: one check with
 * one reason, so `1m30s` or `48h` is one problem, never a pattern problem and a range problem at once.
 */
const durationSchema = (minMs: number, maxMs: number) =>
  z
    // YAML reads `90` as a number: told which unit to add, as the CLI tells it.
    .string({ error: (issue) => (typeof issue.input === 'number' ? `use a unit: ${issue.input}s` : undefined) })
    .refine((t) => durationProblem(t, minMs, maxMs) === undefined, {
      error: (issue) => durationProblem(String(issue.input), minMs, maxMs),
    })
    .meta({ pattern: DURATION_PATTERN.source });

/** A rollout deadline: from 1 s to 24 h (no rollout is followed longer than a day). */
export const DurationSchema = durationSchema(1000, 86_400_000);

const ClusterSelectorSchema = z
  .union([
    z.array(nonEmpty).min(1, 'list at least one cluster'),
    z
      .record(z.string(), z.string())
      .refine((r) => Object.keys(r).length > 0, 'a label selector needs at least one label'),
  ])
  .describe("the clusters: a list of cluster names, or a label selector (every label must match a cluster's labels)");

/** Waves per `rollout` block: each is a gate a change waits at; more would be a rollout no one watches. */
export const MAX_WAVES = 20;

/** A pause between waves: 0s to 24 h. */
export const PauseSchema = durationSchema(0, 86_400_000);

/** A settle window: 0s to 10 min (a change waits at most 4 windows, see docs/how-to/waves-and-gates.md). */
export const SettleSchema = durationSchema(0, 600_000);

/**
 * How vault-rollout follows a restart to its end. A block (not a lone field) so later settings (waves, gates...)
 * join it; at the top level it is the default for every route, on a route it overrides that default.
 */
/** The most workloads a slot can count: a bound on the slot store's work per acquire (one slot item each in DynamoDB). */
export const MAX_UNAVAILABLE_LIMIT = 1000;
const slotLimit = z
  .number()
  .int('must be a whole number')
  .min(1, 'must be at least 1')
  .max(MAX_UNAVAILABLE_LIMIT, `must be at most ${MAX_UNAVAILABLE_LIMIT}`);

/**
 * Workloads rolling at the same time (restarted, rollout not yet complete, failed or timed out): at most `perCluster`
 * in any one cluster and `fleet` over all of them. Slots live in a shared store (lib/slots), so the fleet bound holds
 * across concurrent workers.
 */
export const MaxUnavailableSchema = z
  .strictObject({
    perCluster: slotLimit.optional().describe('workloads rolling at once in one cluster'),
    fleet: slotLimit.optional().describe('workloads rolling at once over every cluster'),
  })
  .refine((m) => m.perCluster !== undefined || m.fleet !== undefined, 'give perCluster, fleet or both')
  .refine(
    (m) => m.perCluster === undefined || m.fleet === undefined || m.perCluster <= m.fleet,
    'perCluster must not exceed fleet',
  );
export type MaxUnavailable = z.infer<typeof MaxUnavailableSchema>;

export const RolloutSettingsSchema = z.strictObject({
  timeout: DurationSchema.optional().describe(
    'how long a restarted workload may take to roll out before it counts as timeout (default 10m)',
  ),
  maxUnavailable: MaxUnavailableSchema.optional().describe(
    'workloads rolling at the same time, per cluster and over the fleet; the others wait (outcome deferred) for a slot',
  ),
  // --- progressive rotation (waves, gates, halts, settle) ---
  waves: z
    .array(
      z.strictObject({
        clusters: ClusterSelectorSchema.describe('label selector or list of cluster names, as for targets'),
      }),
    )
    .min(1, 'list at least one wave')
    .max(MAX_WAVES, `at most ${MAX_WAVES} waves`)
    .optional()
    .describe('in order; the clusters of one wave restart in parallel; clusters in no wave go last, as one wave'),
  gate: z
    .strictObject({
      healthy: z
        .boolean()
        .optional()
        .describe(
          'true (default): every target of a wave must reach rollout complete before the next wave; false: restarted is enough',
        ),
      timeout: DurationSchema.optional().describe(
        'a wave not complete by then (counted from its start) fails the gate (default 10m)',
      ),
      pause: PauseSchema.optional().describe(
        'wait this long after a wave is complete before the next one starts (default 0s)',
      ),
    })
    .optional()
    .describe('what a wave must reach before the next one starts'),
  onFailure: z
    .enum(['halt', 'continue'])
    .optional()
    .describe('halt (default): no later wave restarts for this change; continue: go on, logging the failure'),
  settle: SettleSchema.optional().describe(
    'changes reaching one workload within this window give it one restart (default 0s: none)',
  ),
  // --- end progressive rotation ---
});
export type RolloutSettings = z.infer<typeof RolloutSettingsSchema>;

export const EksSchema = z.strictObject({
  name: iamName(
    /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/,
    'must be an EKS cluster name (letters, digits, - and _, up to 100)',
  ).describe('the EKS cluster name'),
  region: z
    .string()
    .regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region such as us-east-1')
    .describe('its AWS region'),
  roleArn: iamName(/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/, 'must be an IAM role ARN')
    .optional()
    .describe("an IAM role to assume first; default: the process's own AWS credentials"),
});

export const ClusterSchema = z
  .strictObject({
    kubeconfig: KubeconfigSourceSchema.optional().describe(
      'a kubeconfig: exactly one of file, env, inline (each with optional allowExec, allowTokenFile), ssm or secretsManager; one of kubeconfig, eks or inCluster per cluster',
    ),
    context: nonEmpty
      .optional()
      .describe('the kubeconfig context to use (only with kubeconfig); default: its current-context'),
    eks: EksSchema.optional().describe(
      "an EKS cluster, reached with a token signed by the process's AWS credentials (or roleArn)",
    ),
    inCluster: z
      .literal(true)
      .optional()
      .describe("the cluster vault-rollout runs in, reached with its pod's ServiceAccount token and CA"),
    labels: z.record(z.string(), z.string()).default({}).describe('labels that targets and waves select clusters by'),
    insecureSkipTLSVerify: z
      .boolean()
      .optional()
      .describe("do not verify the API server's certificate (logs a warning; TLS is verified otherwise)"),
    concurrency: z
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .describe('patches in flight at once in this cluster (default 10)'),
    rolloutTimeout: DurationSchema.optional().describe(
      'rollout deadline for every workload of this cluster, unless its route sets rollout.timeout',
    ),
  })
  .refine((c) => [c.kubeconfig, c.eks, c.inCluster].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of kubeconfig, eks or inCluster: true',
  })
  .refine((c) => c.context === undefined || c.kubeconfig !== undefined, {
    message: 'context selects a context of the kubeconfig: give it only with kubeconfig',
    path: ['context'],
  })
  .describe('a cluster vault-rollout restarts workloads in, by its name (lowercase letters, digits, "-")');
export type ClusterConfig = z.infer<typeof ClusterSchema>;

/**
 * Notifications: where rotation events go. Sink secrets — the Slack and Teams webhook URLs (whoever holds
 * one can post to the channel), the webhook's HMAC key — are named by environment variable, never written in the
 * table; the table is read by editors, CI and `plan`. The URLs are checked when a process reads them (https only).
 */
export const NotificationEvents = [
  'halted',
  'target-failed',
  'rollout-failed',
  'complete',
  'progressing',
  'dead-letter',
] as const;
export type NotificationEventKind = (typeof NotificationEvents)[number];

const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
const envName = z.string().regex(ENV_NAME, 'must be an environment variable name (A-Z, 0-9, _)');

const SINK_TYPE = 'slack, teams (incoming webhooks), webhook (a signed JSON POST) or sns (an SNS topic)';

export const NotificationSinkSchema = z
  .discriminatedUnion(
    'type',
    [
      z.strictObject({
        type: z.literal('slack').describe(SINK_TYPE),
        urlFromEnv: envName.describe('environment variable holding the Slack incoming-webhook URL (a secret)'),
      }),
      z.strictObject({
        type: z.literal('teams').describe(SINK_TYPE),
        urlFromEnv: envName.describe(
          'environment variable holding the Teams incoming-webhook or Workflows URL (a secret)',
        ),
      }),
      z
        .strictObject({
          type: z.literal('webhook').describe(SINK_TYPE),
          url: z
            .url({ protocol: /^https$/, error: 'must be an https URL' })
            .optional()
            .describe('the receiver (https); or urlFromEnv'),
          urlFromEnv: envName.optional().describe('environment variable holding the receiver URL'),
          secretFromEnv: envName.describe('environment variable holding the HMAC-SHA256 key the body is signed with'),
        })
        .refine((w) => (w.url === undefined) !== (w.urlFromEnv === undefined), 'give exactly one of url or urlFromEnv'),
      z.strictObject({
        type: z.literal('sns').describe(SINK_TYPE),
        topicArn: z
          .string()
          .regex(
            /^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/,
            'must be an SNS topic ARN',
          )
          .describe("the topic the event is published to (through the AWS SDK, the process's credentials)"),
      }),
    ],
    {
      error:
        'a sink is { type: slack | teams, urlFromEnv }, { type: webhook, url | urlFromEnv, secretFromEnv } or { type: sns, topicArn }',
    },
  )
  .describe('one sink, by its type');
export type NotificationSink = z.infer<typeof NotificationSinkSchema>;

export const NotificationsSchema = z
  .strictObject({
    sinks: z
      .record(
        z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'sink names are lowercase letters, digits and "-"'),
        NotificationSinkSchema,
      )
      .default({})
      .describe("named sinks; a route's block adds sinks or overrides one of the same name"),
    events: z
      .array(z.enum(NotificationEvents))
      .min(1)
      .optional()
      .describe("which events are sent (default: all); a route's list replaces the top-level one"),
    progressingAfter: DurationSchema.optional().describe(
      'a rollout still progressing this long after its restart sends one progressing event (default 15m)',
    ),
  })
  .describe("where rotation events are sent; at the top level every route's default, on a route added to it");
export type NotificationsSettings = z.infer<typeof NotificationsSchema>;

const K8S_NAME_TEMPLATE = /^[a-z0-9{]([-a-z0-9.{}_A-Za-z]*[a-z0-9}])?$/;
const NAMESPACE_DESCRIPTION = 'the Kubernetes namespace (may use {captures}; then namespaces is required)';

/**
 * The namespaces a target may reach: names, or globs where `*` stands for any run of characters (`team-*`). A
 * namespace rendered from a path capture outside them is a plan problem, never a patch.
 */
const NamespaceBoundSchema = z
  .array(
    z
      .string()
      .max(63)
      .regex(
        /^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$/,
        'must be a namespace name or a glob of one, e.g. payments or team-*',
      ),
  )
  .min(1, 'list at least one namespace or glob')
  .describe(
    'namespaces this target may reach (names or globs with *); a namespace rendered outside them is not planned',
  );

/**
 * The objects a target may reach when its name is rendered from the change (`name: "{service}"`): names, or globs
 * where `*` stands for any run of characters (`api-*`). Without it, whoever may write `secret/payments/<x>` could
 * restart any workload of the namespace by choosing `<x>`; a name rendered outside them is a plan problem.
 */
const NameBoundSchema = z
  .array(
    z
      .string()
      .max(253)
      .regex(
        /^[a-z0-9*]([-a-z0-9.*]*[a-z0-9*])?$/,
        'must be a Kubernetes object name or a glob of one, e.g. api or api-*',
      ),
  )
  .min(1, 'list at least one name or glob')
  .describe(
    'object names this target may reach (names or globs with *); a name rendered from the path outside them is not planned',
  );

/** Bounds on a target's `keys`: a KV secret with more keys than this is read whole by everything that uses it. */
export const TARGET_KEY_LIMITS = { keys: 64, length: 256 } as const;

/**
 * The keys of the Vault secret a target uses: it restarts only when one of them changed, judged from the
 * audit log's HMACs (lib/plan/changed-keys.ts). Without it every key counts (a whole-secret restart). Key names are
 * not secrets: they travel in queue messages and plans.
 */
export const KeysSchema = z
  .array(
    z
      .string()
      .min(1, 'a key name must not be empty')
      .max(TARGET_KEY_LIMITS.length, `a key name has at most ${TARGET_KEY_LIMITS.length} characters`)
      .refine(
        (k) => ![...k].some((c) => c <= '\u001f' || c === '\u007f'),
        'a key name must not contain control characters',
      ),
  )
  .min(1, 'list at least one key, or leave keys out (every key)')
  .max(TARGET_KEY_LIMITS.keys, `at most ${TARGET_KEY_LIMITS.keys} keys`)
  .refine((keys) => new Set(keys).size === keys.length, 'each key once')
  .describe(
    'the keys of the Vault secret this target uses; it restarts only when one of them changed (default: every key)',
  );

export const WorkloadTargetSchema = z
  .strictObject({
    clusters: ClusterSelectorSchema,
    namespace: z
      .string()
      .regex(K8S_NAME_TEMPLATE, 'must be a Kubernetes namespace name (may use {captures})')
      .describe(NAMESPACE_DESCRIPTION),
    namespaces: NamespaceBoundSchema.optional(),
    names: NameBoundSchema.optional(),
    keys: KeysSchema.optional(),
    kind: z.enum(WorkloadKinds).describe('the workload kind (Rollout: Argo Rollouts)'),
    name: z
      .string()
      .regex(K8S_NAME_TEMPLATE, 'must be a Kubernetes object name (may use {captures})')
      .optional()
      .describe("the workload's name (may use {captures}); exactly one of name, selector, annotated"),
    selector: nonEmpty
      .optional()
      .describe('a label selector (app=x, tier in (a,b)); each capture in it must render a label value'),
    annotated: z
      .literal(true)
      .optional()
      .describe('the workloads of this kind in the namespace that opt in with the annotation vault-rollout.io/watch'),
  })
  .refine((t) => [t.name, t.selector, t.annotated].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of name, selector or annotated: true',
  });

export const ResourceTargetSchema = z.strictObject({
  clusters: ClusterSelectorSchema,
  namespaces: NamespaceBoundSchema.optional(),
  names: NameBoundSchema.optional(),
  keys: KeysSchema.optional(),
  resource: z
    .strictObject({
      apiVersion: z
        .string()
        .regex(/^([a-z0-9.-]+\/)?v\d+[a-z0-9]*$/, 'must be group/version, e.g. example.com/v1')
        .describe('group/version of the custom resource'),
      kind: z
        .string()
        .regex(/^[A-Z][A-Za-z0-9]*$/, 'must be a Kind, e.g. Harbor')
        .describe('its kind'),
      namespace: z
        .string()
        .regex(K8S_NAME_TEMPLATE)
        .optional()
        .describe('its namespace (may use {captures}); none: cluster-scoped'),
      name: z
        .string()
        .regex(K8S_NAME_TEMPLATE, 'must be a Kubernetes object name (may use {captures})')
        .describe('its name (may use {captures})'),
    })
    .describe('a custom resource an operator acts on, patched with patch'),
  patch: z
    .record(z.string(), z.unknown())
    .refine((p) => Object.keys(p).length > 0, 'the merge-patch template must not be empty')
    .describe(
      'merge-patch template; string values may use captures and {version}, {path}, {key}, {mount}, {vaultNamespace}, {operation}; keys may not',
    ),
  wait: z
    .strictObject({
      condition: z
        .string()
        .regex(/^[A-Za-z][A-Za-z0-9.-]{0,62}$/, 'must be a status condition type, e.g. Ready')
        .describe('the status condition type, e.g. Ready'),
    })
    .optional()
    .describe(
      'how to tell the operator is done: a status condition of this type becoming True; without it there is nothing to wait for',
    ),
});

/** Operators that copy a Vault secret into a Kubernetes Secret, and that vault-rollout can make sync now. */
export const SyncKinds = ['ExternalSecret', 'VaultStaticSecret'] as const;
export type SyncKind = (typeof SyncKinds)[number];

const K8S_NAME_MESSAGE = 'must be a Kubernetes object name (may use {captures})';

/**
 * Sync first, then restart the consumers: nudge the operator's resource, wait until it has written the Secret, then
 * restart the workloads whose pod template references that Secret (lib/workloads/consumers.ts).
 */
export const SyncTargetSchema = z.strictObject({
  clusters: ClusterSelectorSchema,
  namespace: z
    .string()
    .regex(K8S_NAME_TEMPLATE, 'must be a Kubernetes namespace name (may use {captures})')
    .describe(NAMESPACE_DESCRIPTION),
  namespaces: NamespaceBoundSchema.optional(),
  names: NameBoundSchema.optional(),
  keys: KeysSchema.optional(),
  sync: z
    .strictObject({
      kind: z
        .enum(SyncKinds)
        .describe('ExternalSecret (external-secrets.io/v1) or VaultStaticSecret (secrets.hashicorp.com/v1beta1)'),
      name: z
        .string()
        .regex(K8S_NAME_TEMPLATE, K8S_NAME_MESSAGE)
        .describe('the ExternalSecret or VaultStaticSecret (may use {captures})'),
      timeout: DurationSchema.optional().describe(
        'how long the operator may take to write the Secret before the target fails (default 5m)',
      ),
    })
    .describe("make the operator sync now, wait until it wrote the Secret, then restart the Secret's consumers"),
  restart: z
    .enum(['consumers', 'none'])
    .default('consumers')
    .describe('consumers (default): restart the workloads that reference the synced Secret; none: only sync'),
});

/** Restart whatever references a Secret (no sync step), or whatever mounts a SecretProviderClass (CSI driver). */
export const ConsumersTargetSchema = z.strictObject({
  clusters: ClusterSelectorSchema,
  namespace: z
    .string()
    .regex(K8S_NAME_TEMPLATE, 'must be a Kubernetes namespace name (may use {captures})')
    .describe(NAMESPACE_DESCRIPTION),
  namespaces: NamespaceBoundSchema.optional(),
  names: NameBoundSchema.optional(),
  keys: KeysSchema.optional(),
  consumers: z
    .union(
      [
        z.strictObject({
          secret: z
            .string()
            .regex(K8S_NAME_TEMPLATE, K8S_NAME_MESSAGE)
            .describe('restart the workloads whose pod template references this Secret'),
        }),
        z.strictObject({
          secretProviderClass: z
            .string()
            .regex(K8S_NAME_TEMPLATE, K8S_NAME_MESSAGE)
            .describe('restart the workloads whose pods mount this SecretProviderClass (secrets-store.csi.k8s.io)'),
        }),
      ],
      { error: 'must be exactly one of { secret: NAME } or { secretProviderClass: NAME }' },
    )
    .describe('restart whatever consumes a Secret or a SecretProviderClass, without a sync step'),
});

export const TargetSchema = z.union([
  ResourceTargetSchema,
  SyncTargetSchema,
  ConsumersTargetSchema,
  WorkloadTargetSchema,
]);
export type WorkloadTarget = z.infer<typeof WorkloadTargetSchema>;
export type ResourceTarget = z.infer<typeof ResourceTargetSchema>;
export type SyncTarget = z.infer<typeof SyncTargetSchema>;
export type ConsumersTarget = z.infer<typeof ConsumersTargetSchema>;
export type Target = z.infer<typeof TargetSchema>;

export const DEFAULT_OPERATIONS = ['write', 'undelete'] as const;

export const RouteSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be lowercase letters, digits and "-"')
      .describe('unique name of the route (lowercase letters, digits, "-")'),
    match: z
      .strictObject({
        namespace: z.string().optional().describe('Vault Enterprise namespace; omitted = root'),
        path: nonEmpty.describe('mount + key without data/; * one segment, ** any, {x} captures'),
        operations: z
          .array(z.enum(Operations))
          .min(1)
          .default([...DEFAULT_OPERATIONS])
          .describe('which operations restart'),
      })
      .describe('which Vault KV changes this route takes'),
    targets: z
      .array(TargetSchema)
      .min(1, 'a route needs at least one target')
      .describe(
        "what restarts: a workload (kind + name, selector or annotated), a custom resource (resource + patch), a sync (sync) or a Secret's consumers (consumers)",
      ),
    rollout: RolloutSettingsSchema.optional().describe(
      "how this route's restarts roll out; overrides the top-level rollout",
    ),
    notifications: NotificationsSchema.optional(),
  })
  .describe('one route: a path pattern and the targets it restarts');
export type Route = z.infer<typeof RouteSchema>;

/**
 * Where the deployment that serves this table keeps its halts and released waves: a Lambda stage's DynamoDB table, or
 * the SQLite file of a `serve` in its pod. `apply`, `reset-version` and `reconcile` worked here refuse to restart for
 * such a table unless they are pointed at that store (VAULT_ROLLOUT_STATE_TABLE / VAULT_ROLLOUT_STATE_DB): with a
 * store of their own, the deployment's halts would not hold against them and theirs would not hold against it.
 */
export const RotationStoreSchema = z.union([
  z.strictObject({
    dynamodb: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{3,255}$/, 'must be a DynamoDB table name (3-255 letters, digits, _ . -)')
      .describe("the DynamoDB table (a Lambda stage's RotationStateTableName output)"),
  }),
  z.strictObject({
    sqlite: z
      .string()
      .regex(/^\/[^\0]{1,4095}$/, 'must be an absolute file path')
      .describe('the SQLite file, where serve runs (its pod: /var/lib/vault-rollout/vault-rollout/rotations.sqlite)'),
  }),
]);
export type RotationStoreRef = z.infer<typeof RotationStoreSchema>;

export const RoutingTableSchema = z.strictObject({
  clusters: z
    .record(
      z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'cluster names are lowercase letters, digits and "-"'),
      ClusterSchema,
    )
    .describe('the clusters, by name, and how to reach each'),
  vault: z
    .strictObject({
      mounts: z
        .record(z.string(), z.union([z.literal(1), z.literal(2)]).describe('KV version of the mount: 1 or 2'))
        .default({})
        .describe('KV version per mount; under a Vault namespace write namespace/mount'),
    })
    .default({ mounts: {} })
    .describe('what vault-rollout needs to know of Vault'),
  routes: z.array(RouteSchema).default([]).describe('which changed Vault paths restart which workloads'),
  rollout: RolloutSettingsSchema.optional().describe("how restarts roll out: every route's default"),
  notifications: NotificationsSchema.optional(),
  rotationStore: RotationStoreSchema.optional().describe(
    'where the deployment serving this table keeps halts and released waves: apply, reset-version and reconcile ' +
      'without --queue-url refuse to run unless pointed at it',
  ),
});
export type RoutingTableDocument = z.infer<typeof RoutingTableSchema>;
