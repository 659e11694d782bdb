// helm for the chart's tests (infra/helm/vault-rollout): built from its Go module by build-helm.sh, cached in
// ~/.cache/vault-rollout/helm-<version>/ and linked as .local/bin/helm. The integration global setup builds it
// before any test file runs; a test that needs helm and finds it missing fails, never skips.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './kube-http.ts';

export const HELM_BIN = join(REPO_ROOT, '.local', 'bin', 'helm');
const BUILD_SCRIPT = join(REPO_ROOT, 'test', 'clusters', 'build-helm.sh');

/** Builds helm when its cache is missing or stale (seconds when cached); throws when it cannot. */
export async function ensureHelm(): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const child = execFile('bash', [BUILD_SCRIPT], { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 }, (error) =>
      error
        ? reject(new Error(`building helm failed (test/clusters/build-helm.sh): ${error.message}`, { cause: error }))
        : resolve(),
    );
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(d));
  });
  return helmBinary();
}

/** The helm binary the global setup provided; throws (the test fails) when it is not there. */
export function helmBinary(): string {
  if (!existsSync(HELM_BIN))
    throw new Error(`${HELM_BIN} is missing: the integration global setup builds it (test/clusters/build-helm.sh)`);
  return HELM_BIN;
}
