// The GitOps helpers for test/integration/gitops-safe.test.ts: gitops-flux (Flux's kustomize-controller server-side
// apply) and gitops-argo (Argo CD's client-side apply and diff), built from test/gitops/ with the tools' own Go
// modules by build-gitops.sh, cached in ~/.cache/vault-rollout/gitops-helpers-<hash>/ and linked into .local/bin/.
// The integration global setup builds them before any test file runs; a test that needs one and finds it missing
// fails, never skips.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './kube-http.ts';

export type GitopsHelper = 'gitops-flux' | 'gitops-argo';
const BUILD_SCRIPT = join(REPO_ROOT, 'test', 'clusters', 'build-gitops.sh');

/** Builds both helpers when their cache is missing or stale (seconds when cached); throws when it cannot. */
export async function ensureGitopsHelpers(): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = execFile('bash', [BUILD_SCRIPT], { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 }, (error) =>
      error
        ? reject(
            new Error(`building the GitOps helpers failed (test/clusters/build-gitops.sh): ${error.message}`, {
              cause: error,
            }),
          )
        : resolve(),
    );
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(d));
  });
}

/** The helper the global setup provided; throws (the test fails) when it is not there. */
export function gitopsBinary(name: GitopsHelper): string {
  const file = join(REPO_ROOT, '.local', 'bin', name);
  if (!existsSync(file))
    throw new Error(`${file} is missing: the integration global setup builds it (test/clusters/build-gitops.sh)`);
  return file;
}
