/**
 * What the metrics reference says of each metric beyond METRIC_SPECS (lib/kernel/telemetry.ts): the label values
 * (the labels themselves come from the spec), the meaning in a sentence, and which processes export it. Keyed by
 * MetricName, so a metric added to METRICS without its line here does not compile; docs/reference/metrics.md is
 * generated from both (`npm run docs:reference`).
 */
import type { MetricName } from '../kernel/telemetry.ts';

export interface MetricDoc {
  /** The labels with their values, in Markdown; `–` when none. */
  labels: string;
  meaning: string;
  /** Which processes export it: serve, worker, relay (Prometheus), EMF (the Lambda functions). */
  where: string;
}

export const METRIC_DOCS: Readonly<Record<MetricName, MetricDoc>> = {
  ChangesReceived: { labels: '–', meaning: 'Vault KV changes the intake accepted', where: 'serve, EMF' },
  RecordsIgnored: {
    labels: '`reason` (`read`, `metadata`, `not-kv`, `sys`, … the `IgnoreReasons` enum)',
    meaning: 'records understood and ignored',
    where: 'serve, EMF',
  },
  RecordsRejected: {
    labels: '–',
    meaning: 'records that could not be read (the reason is free text that may quote the record: logged, not a label)',
    where: 'serve, EMF',
  },
  Targets: {
    labels: '`cluster`, `outcome` (`restarted`, `unchanged`, `skipped`, `failed`, `deferred`, …)',
    meaning: 'restart targets worked',
    where: 'serve, worker, EMF',
  },
  VaultToPatchLag: {
    labels: '`cluster`',
    meaning: "from the Vault change's time to its accepted patch",
    where: 'serve, worker, EMF',
  },
  RefusedMessages: {
    labels: '–',
    meaning: 'queue messages refused and dead-lettered, never executed',
    where: 'serve, worker, EMF',
  },
  HaltedRotations: { labels: '–', meaning: 'rotations a gate halted (alarmed in Lambda)', where: 'serve, worker, EMF' },
  VisibilityLost: {
    labels: '–',
    meaning: 'messages the queue took back before the worker handed them back',
    where: 'serve, worker, EMF',
  },
  RolloutDuration: {
    labels: '`cluster`, `outcome` (`complete`, `failed`, `timeout`)',
    meaning:
      "from the cluster step that patched to the look (the step's, or a continuation's) that saw the rollout end",
    where: 'serve, worker, EMF',
  },
  GateDecisions: {
    labels: '`decision` (`released`: the next wave queued, also after a failure with `onFailure: continue`; `halted`)',
    meaning: 'wave gate decisions',
    where: 'serve, worker, EMF',
  },
  KubeRequestDuration: {
    labels: '`cluster`, `method`, `outcome` (`ok`, `client_error`, `server_error`, `no_answer`)',
    meaning: 'Kubernetes API request latency (watches excluded: long by design)',
    where: 'serve, worker',
  },
  KubeRequestErrors: {
    labels: '`cluster`, `outcome`',
    meaning: 'Kubernetes API requests that failed',
    where: 'serve, worker',
  },
  VaultRequestDuration: {
    labels: '`outcome`',
    meaning: "Vault API request latency (metadata reads, logins, event subscriptions' set-up)",
    where: 'relay, serve, worker',
  },
  VaultRequestErrors: { labels: '`outcome`', meaning: 'Vault API requests that failed', where: 'relay, serve, worker' },
  QueueDepth: {
    labels: '`state` (`available`: waiting or held for a delay; `in_flight`)',
    meaning: "messages in `serve`'s queue",
    where: 'serve',
  },
  QueueOldestMessageAge: {
    labels: '–',
    meaning: 'age (since accepted) of the oldest change waiting, continuations and gates left out; 0 when none',
    where: 'serve',
  },
  ContinuationsPending: {
    labels: '–',
    meaning: 'continuations in the queue: restarts whose rollouts are still followed',
    where: 'serve',
  },
  ContinuationOldestAge: {
    labels: '–',
    meaning: 'age of the oldest continuation (since its cluster step); 0 when none',
    where: 'serve',
  },
  DeadLetters: { labels: '–', meaning: "`serve`'s dead letters, kept for an operator", where: 'serve' },
  RelayRecords: {
    labels: '`stage` (`received`, `spooled`, `delivered`)',
    meaning: "the relay's records",
    where: 'relay',
  },
  RelayRecordsDropped: {
    labels: '`reason` (`spool-full`, `overload`, `rejected`, `too-large`, …)',
    meaning: 'records the relay dropped',
    where: 'relay',
  },
  RelaySpoolBytes: { labels: '–', meaning: 'bytes in the spool (on disk and on their way to it)', where: 'relay' },
  RelayDeliveryLag: {
    labels: '–',
    meaning: 'age of the oldest spooled batch not yet delivered; 0 when none',
    where: 'relay',
  },
  Notifications: {
    labels: '`outcome` (`sent`, `retry`, `dropped`)',
    meaning: 'notification deliveries ([Notifications](../how-to/notifications.md))',
    where: 'serve, EMF',
  },
};
