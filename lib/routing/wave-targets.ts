/**
 * Restart order inside a cluster: a wave of `rollout.waves` may select targets as well as clusters (servers before
 * their clients), so one cluster's targets can fall in several waves. The selector names targets as the routing
 * table's targets name them — their kind, namespace and name as planned — so the planner places each target in a
 * wave without reading anything from a cluster. Pure.
 */
import { z } from 'zod';

/** Names and globs a wave's selector may list, per field: a wave is read by a person, not generated. */
export const MAX_WAVE_TARGET_ENTRIES = 50;

const globList = (what: string, pattern: RegExp, example: string, max: number) =>
  z
    .array(z.string().max(max).regex(pattern, `must be a ${what} or a glob of one, e.g. ${example}`))
    .min(1, `list at least one ${what}, or leave the field out`)
    .max(MAX_WAVE_TARGET_ENTRIES, `at most ${MAX_WAVE_TARGET_ENTRIES} entries`);

export const WaveTargetsSchema = z
  .strictObject({
    kinds: z
      .array(
        z
          .string()
          .max(63)
          .regex(/^[A-Z][A-Za-z0-9]*$/, 'must be a Kind, e.g. StatefulSet'),
      )
      .min(1, 'list at least one kind, or leave kinds out')
      .max(MAX_WAVE_TARGET_ENTRIES, `at most ${MAX_WAVE_TARGET_ENTRIES} entries`)
      .optional()
      .describe('target kinds as the route names them (Deployment, StatefulSet, Rollout, a resource kind, Secret...)'),
    namespaces: globList('namespace name', /^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$/, 'payments or team-*', 63)
      .optional()
      .describe('namespaces of the targets (names or globs with *), as planned'),
    names: globList('object name', /^[a-z0-9*]([-a-z0-9.*]*[a-z0-9*])?$/, 'db or db-*', 253)
      .optional()
      .describe(
        'names of the targets (names or globs with *), as planned; a target named by a label selector has no name',
      ),
  })
  .refine((t) => t.kinds !== undefined || t.namespaces !== undefined || t.names !== undefined, {
    message: 'give at least one of kinds, namespaces or names (or leave targets out: every target of the clusters)',
  })
  .describe(
    "only these targets of the wave's clusters restart in this wave (servers before their clients); every field given must match; the others go to a later wave that selects them, else last",
  );
export type WaveTargetsSettings = z.infer<typeof WaveTargetsSchema>;

/** A wave's target selector, compiled: each field absent matches every target. */
export interface WaveTargets {
  kinds?: ReadonlySet<string>;
  namespaces?: readonly RegExp[];
  names?: readonly RegExp[];
}

/** A planned target as a wave selects it. */
export interface WaveMember {
  cluster: string;
  kind: string;
  namespace: string;
  name?: string | undefined;
}

const glob = (g: string): RegExp => new RegExp(`^${g.replace(/[.]/g, '\\.').replace(/\*/g, '[-a-z0-9.]*')}$`);

/** The compiled selectors of waves, or undefined when no wave selects targets (waves of clusters, as before). */
export function compileWaveTargets(
  waves: ReadonlyArray<{ targets?: WaveTargetsSettings | undefined }> | undefined,
): Array<WaveTargets | undefined> | undefined {
  if (waves === undefined || !waves.some((w) => w.targets !== undefined)) return undefined;
  return waves.map(({ targets }) =>
    targets === undefined
      ? undefined
      : {
          ...(targets.kinds ? { kinds: new Set(targets.kinds) } : {}),
          ...(targets.namespaces ? { namespaces: targets.namespaces.map(glob) } : {}),
          ...(targets.names ? { names: targets.names.map(glob) } : {}),
        },
  );
}

/**
 * Whether a wave's selector (absent: every target) selects this target. A names selector never selects a nameless one.
 */
export function selectsTarget(selector: WaveTargets | undefined, target: Omit<WaveMember, 'cluster'>): boolean {
  if (selector === undefined) return true;
  if (selector.kinds && !selector.kinds.has(target.kind)) return false;
  if (selector.namespaces && !selector.namespaces.some((r) => r.test(target.namespace))) return false;
  const name = target.name;
  if (selector.names && (name === undefined || !selector.names.some((r) => r.test(name)))) return false;
  return true;
}
