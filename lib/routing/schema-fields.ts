/**
 * The field schemas the parts of the routing table schema share (lib/routing/schema.ts): a non-empty string, a
 * duration of the CLI's grammar within bounds, and the clusters a target or a wave selects.
 */
import { z } from 'zod';
import { DURATION_PATTERN, durationProblem } from '../kernel/duration.ts';

export const nonEmpty = z.string().min(1, 'must not be empty');

/**
 * A duration of the one grammar the CLI takes too (lib/kernel/duration.ts), from `minMs` to `maxMs`: one check with
 * one reason, so `1m30s` or `48h` is one problem, never a pattern problem and a range problem at once.
 */
export const durationSchema = (minMs: number, maxMs: number) =>
  z
    // YAML reads `90` as a number: told which unit to add, as the CLI tells it.
    .string({ error: (issue) => (typeof issue.input === 'number' ? `use a unit: ${issue.input}s` : undefined) })
    .refine((t) => durationProblem(t, minMs, maxMs) === undefined, {
      error: (issue) => durationProblem(String(issue.input), minMs, maxMs),
    })
    .meta({ pattern: DURATION_PATTERN.source });

/** A rollout deadline: from 1 s to 24 h (no rollout is followed longer than a day). */
export const DurationSchema = durationSchema(1000, 86_400_000);

export const ClusterSelectorSchema = z
  .union([
    z.array(nonEmpty).min(1, 'list at least one cluster'),
    z
      .record(z.string(), z.string())
      .refine((r) => Object.keys(r).length > 0, 'a label selector needs at least one label'),
  ])
  .describe("the clusters: a list of cluster names, or a label selector (every label must match a cluster's labels)");
