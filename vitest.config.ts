import { defineConfig } from 'vitest/config';

// Two projects: fast pure unit tests, and integration tests that need the real test clusters
// (brought up once by the global setup and stopped after).
export default defineConfig({
  test: {
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
        },
      },
    ],
  },
});
