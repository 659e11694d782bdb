/**
 * Vitest setup file (integration project): names the running test file in VAULT_ROLLOUT_TEST_FILE, so the Vault and
 * OpenBao servers it starts are noted against it for the compatibility matrix (test/vault/server.ts, test/matrix.ts).
 */
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll } from 'vitest';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

// The first argument is vitest's fixture context, which it wants destructured; the second is the suite — in a setup
// file, the test file itself.
// eslint-disable-next-line no-empty-pattern
beforeAll(({}, suite) => {
  const { filepath } = suite as { filepath?: string };
  if (filepath !== undefined) process.env.VAULT_ROLLOUT_TEST_FILE = relative(ROOT, filepath);
});
