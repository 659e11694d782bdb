/**
 * The routing table: which clusters exist and how to reach them, the KV version of each mount, and which
 * changed Vault paths restart which workloads. The zod schema is the single source; the JSON Schema that
 * editors use is generated from it (`npm run schema`). Its targets (target-schema.ts), its notifications
 * (notifications-schema.ts) and the fields they share (schema-fields.ts) are files of their own.
 */
import { z } from 'zod';
import { GateApprovalSchema } from './approval-schema.ts';
import { Operations } from '../sources/secret-change.ts';
import { NotificationsSchema } from './notifications-schema.ts';
import { BreakerSchema, RouteModeSchema } from './breaker-schema.ts';
import { ClusterSelectorSchema, DurationSchema, durationSchema, nonEmpty } from './schema-fields.ts';
import { TargetSchema } from './target-schema.ts';
import { WaveTargetsSchema } from './wave-targets.ts';
import { RestartWindowSchema } from './restart-window.ts';

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
/**
 * The most workloads a slot can count: a bound on the slot store's work per acquire (one slot item each in DynamoDB).
 */
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
        targets: WaveTargetsSchema.optional(),
        window: RestartWindowSchema.optional().describe("this wave's maintenance window, over the rollout's"),
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
      approval: GateApprovalSchema.optional(),
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
  breaker: BreakerSchema.optional(),
  window: RestartWindowSchema.optional().describe(
    'maintenance window: restarts start only inside it; a change outside it waits, then restarts once (newest version)',
  ),
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
    mode: RouteModeSchema.optional(),
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
