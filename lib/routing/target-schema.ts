/**
 * The targets of a route in the routing table schema (lib/routing/schema.ts): a workload, a custom resource, a sync
 * through an operator, or the consumers of a Secret, each with the namespaces, names and keys it may reach.
 */
import { z } from 'zod';
import { RolloutRestartBySchema } from './rollout-restart-by.ts';
import { ClusterSelectorSchema, DurationSchema, nonEmpty } from './schema-fields.ts';

export const WorkloadKinds = ['Deployment', 'StatefulSet', 'DaemonSet', 'Rollout', 'CronJob'] as const;
export type WorkloadKind = (typeof WorkloadKinds)[number];

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
    restartBy: RolloutRestartBySchema.optional(),
  })
  .refine((t) => [t.name, t.selector, t.annotated].filter((v) => v !== undefined).length === 1, {
    message: 'give exactly one of name, selector or annotated: true',
  })
  .refine((t) => t.restartBy === undefined || t.kind === 'Rollout', {
    message: 'restartBy is for kind: Rollout only (Argo Rollouts); other kinds always restart by their pod template',
    path: ['restartBy'],
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
