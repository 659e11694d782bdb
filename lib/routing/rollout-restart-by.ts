/**
 * How an Argo Rollout target is restarted (`restartBy` on a `kind: Rollout` target):
 * - `restartAt` (the default): `spec.restartAt`, the same revision with its pods replaced, no analysis;
 * - `template`: an annotation on the pod template, a new revision that goes through the Rollout's strategy, its
 *   canary steps and analysis, so a bad credential is caught by the analysis and aborted like any bad release.
 */
import { z } from 'zod';

export const RolloutRestartBys = ['restartAt', 'template'] as const;
export type RolloutRestartBy = (typeof RolloutRestartBys)[number];

export const RolloutRestartBySchema = z
  .enum(RolloutRestartBys)
  .describe(
    'Rollout targets only: restartAt (default: spec.restartAt, same revision, pods replaced) or template (a pod template annotation: a new revision through the canary steps and analysis)',
  );
