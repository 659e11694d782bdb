/**
 * Test lanes: `npm test` runs the integration files in two vitest processes at once, each on its own set of test
 * clusters, because most of their time is spent waiting on real rollouts, visibility timeouts and restarts rather
 * than computing (see test/run-suite.ts). VAULT_ROLLOUT_TEST_LANE picks the lane of a process:
 *   unset — every integration file, on the clusters under .local/ (what a developer's `vitest run` gets);
 *   a     — every integration file but lane b's, on the clusters under .local/;
 *   b     — LANE_B_FILES only, on clusters of their own under .local/lane-b/ (ports: its own
 *           VAULT_ROLLOUT_CLUSTERS_PORT_BASE, set by the runner).
 * Imported by vitest.config.ts, the clusters and the hygiene capture: nothing here may import test code.
 */
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/**
 * The slowest files, waiting more than computing: a share of the suite's wall time each lane can wait through
 * beside the other (figures of 2026-11-27 in a clean clone: serve-kill 340 s, continuations 320 s, faults 156 s,
 * rollout-health 85 s, of ~1,660 s of integration files). Lane a also runs the unit project first.
 */
export const LANE_B_FILES = [
  'test/integration/serve-kill.test.ts',
  'test/integration/continuations.test.ts',
  'test/integration/faults.test.ts',
  'test/integration/rollout-health.test.ts',
  'test/integration/vault-auth.test.ts',
] as const;

export type TestLane = 'a' | 'b' | undefined;

export function testLane(env: NodeJS.ProcessEnv = process.env): TestLane {
  const raw = env.VAULT_ROLLOUT_TEST_LANE;
  if (raw === undefined || raw === '') return undefined;
  if (raw === 'a' || raw === 'b') return raw;
  throw new Error(`VAULT_ROLLOUT_TEST_LANE=${raw}: expected a or b (or unset for every file)`);
}

/** Where this lane keeps its clusters' state, the clusters lock and the captured test output. */
export const LANE_LOCAL_DIR = testLane() === 'b' ? join(ROOT, '.local', 'lane-b') : join(ROOT, '.local');
