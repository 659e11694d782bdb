/** The names vault-rollout writes on Kubernetes objects: the restart record's annotations and its Events' identity. */

/**
 * The Event that marks a halt on the workload that failed a wave's gate: named from its restart (so a repeat records
 * nothing twice, and `status` finds it by name with `list` on Events alone) and with this reason.
 */
export const haltEventName = (workload: string, restartToken: string): string =>
  `${workload}.vr-${restartToken.slice(0, 16)}.halted`;
export const HALT_EVENT_REASON = 'RotationHalted';

/** The reasons of the Events vault-rollout creates (lib/engine/events.ts). */
export const EVENT_REASONS = {
  /**
   * Normal, on each object restarted (or whose operator was asked to sync): `<name>.vr-<first 16 of the restart
   * token>`.
   */
  secretRotated: 'SecretRotated',
  /** Normal, when a followed rollout ends complete: `<name>.vr-<token>.rollout`. */
  rolloutComplete: 'RolloutComplete',
  /** Warning, when a followed rollout ends failed or timed out: `<name>.vr-<token>.rollout`. */
  rolloutFailed: 'RolloutFailed',
  /** Warning, on the workload that failed a wave's gate: haltEventName. */
  halted: HALT_EVENT_REASON,
  /** Normal, on the same workload, when `halts clear` clears the halt: who, from which host, when. */
  haltCleared: 'RotationHaltCleared',
} as const;

/**
 * Who vault-rollout's Events say wrote them: `source.component`, `reportingComponent` and `reportingInstance` of
 * every Event it creates (lib/engine/events.ts), created with the field manager of the same name (kube-port.ts), so
 * `metadata.managedFields` names it too. `status` counts only Events that carry all four.
 */
export const EVENT_REPORTER = 'vault-rollout';

export const ANNOTATIONS = {
  restartedAt: 'kubectl.kubernetes.io/restartedAt',
  /** JSON object: Vault path (with `#operation` for other than writes) -> the newest version restarted for, or
   *  `time#id` of the change where the feed gives no version (see recordValue). */
  versions: 'vault-rollout.io/versions',
  restartToken: 'vault-rollout.io/restart-token',
  /** Opt-in discovery: comma- or newline-separated path patterns the workload depends on. */
  watch: 'vault-rollout.io/watch',
} as const;
