import { defineConfig } from 'vitest/config';

// Two projects: fast pure unit tests, and integration tests that need the real test clusters
// (brought up once by the global setup and stopped after).
export default defineConfig({
  test: {
    // Everything the suites print is captured, then checked for secrets once all projects have run.
    globalSetup: ['test/global-setup-hygiene.ts'],
    setupFiles: ['test/hygiene/capture.ts'],
    coverage: {
      provider: 'v8',
      include: ['lib/**/*.ts'],
      reporter: ['text-summary', 'json-summary'],
      thresholds: { lines: 90 },
    },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          setupFiles: ['test/hygiene/capture.ts', 'test/property-seed.ts'],
          // A bound, not a speed goal: property tests of 500 runs took 5.7 s beside the integration tests at load 15 on
          // 2 cores (vitest's default of 5 s failed them); a test that hangs still fails.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          setupFiles: ['test/hygiene/capture.ts'],
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
