import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';
import {
  CLUSTER_FREE_FILES,
  COMPATIBILITY_FILES,
  LANE_B_FILES,
  LANE_C_BALANCE_FILES,
  lanesInRun,
  testLane,
} from './test/lanes.ts';

/** The commit's seed for the property tests (test/property-seed.ts); undefined outside a git checkout (then random). */
function commitSeed(): number | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: import.meta.dirname,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return createHash('sha256').update(head).digest().readInt32BE(0);
  } catch {
    return undefined;
  }
}

// In CI the property tests draw from a seed fixed by the commit, derived here once for every worker (which inherit
// the environment); an FC_SEED given by hand wins.
if (process.env.CI === 'true' && process.env.FC_SEED === undefined) {
  const seed = commitSeed();
  if (seed !== undefined) process.env.FC_SEED = String(seed);
}

// The integration files of this process's lane (test/lanes.ts): all of them unless VAULT_ROLLOUT_TEST_LANE is set.
// Chosen by `exclude` over the one glob: `vitest run` (unlike `vitest list`) found no file when `include` listed paths.
const lane = testLane();
const allIntegrationFiles = readdirSync(join(import.meta.dirname, 'test', 'integration'))
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => `test/integration/${f}`);
const laneFiles: readonly string[] | undefined =
  lane === 'b'
    ? LANE_B_FILES
    : lane === 'c'
      ? [...COMPATIBILITY_FILES, ...LANE_C_BALANCE_FILES, ...CLUSTER_FREE_FILES]
      : undefined;
const integrationExcluded =
  lane === 'a'
    ? [...LANE_B_FILES, ...(lanesInRun().includes('c') ? [...CLUSTER_FREE_FILES, ...LANE_C_BALANCE_FILES] : [])]
    : laneFiles
      ? allIntegrationFiles.filter((f) => !laneFiles.includes(f))
      : [];

// Two projects: fast pure unit tests, and integration tests that need the real test clusters
// (brought up once by the global setup and stopped after). `npm test` runs them in two processes (test/run-suite.ts).
export default defineConfig({
  test: {
    // Everything the suites print is captured, then checked for secrets once all projects have run.
    globalSetup: ['test/global-setup-hygiene.ts'],
    setupFiles: ['test/hygiene/capture.ts', 'test/state/isolate.ts'],
    coverage: {
      provider: 'v8', // @vitest/coverage-v8
      include: ['lib/**/*.ts'],
      reporter: ['text-summary', 'json-summary'],
      thresholds: { lines: 90 },
    },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          setupFiles: ['test/hygiene/capture.ts', 'test/state/isolate.ts', 'test/property-seed.ts'],
          // A bound, not a speed goal: property tests of 500 runs took 5.7 s beside the integration tests at load 15 on
          // 2 cores (vitest's default of 5 s failed them); a test that hangs still fails.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: integrationExcluded,
          setupFiles: ['test/hygiene/capture.ts', 'test/state/isolate.ts', 'test/state/current-file.ts'],
          globalSetup: ['test/global-setup-clusters.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          // The files share three clusters; run them one after another.
          fileParallelism: false,
        },
      },
    ],
  },
});
