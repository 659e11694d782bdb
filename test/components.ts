/**
 * Every real component the integration tests run beside the clusters' own binaries: OpenBao and Vault, helm, the GitOps
 * helpers (Flux's and Argo CD's apply and diff), the container image and the docs site's mkdocs venv — built or fetched
 * on first use into ~/.cache/vault-rollout, reused after. The clusters' global
 * setup calls it (so no test waits minutes for a build inside its own timeout), and so does test/run-suite.ts before
 * it starts its lanes, so that two processes never build the same thing at once.
 */
import { ensureMkdocsVenv } from '../tools/site/build.ts';
import { ensureGitopsHelpers } from './clusters/gitops.ts';
import { ensureHelm } from './clusters/helm.ts';
import { imageLayout } from './image/image.ts';
import { ensureServerBinary } from './vault/server.ts';

const since = (t0: number) => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

export async function prepareComponents(
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<void> {
  for (const kind of ['openbao', 'vault'] as const) {
    const started = Date.now();
    await ensureServerBinary(kind);
    log(`[vault] ${kind} ready in ${since(started)}`);
  }
  // helm, for the chart's tests (test/integration/helm-chart.test.ts).
  const helmStarted = Date.now();
  await ensureHelm();
  log(`[helm] ready in ${since(helmStarted)}`);
  // Flux's and Argo CD's apply and diff, for the GitOps test (test/integration/gitops-safe.test.ts).
  const gitopsStarted = Date.now();
  await ensureGitopsHelpers();
  log(`[gitops] helpers ready in ${since(gitopsStarted)}`);
  // The container image, for the image's and the chart's tests.
  const imageStarted = Date.now();
  const image = await imageLayout();
  log(`[image] ${image.built ? 'built' : 'reused'} ${image.layout} in ${since(imageStarted)}`);
  // mkdocs-material from PyPI (pinned with hashes), for the docs site's test (test/integration/docs-site.test.ts).
  const docsStarted = Date.now();
  const docs = await ensureMkdocsVenv();
  log(`[docs] mkdocs venv ${docs.built ? 'built' : 'reused'} in ${since(docsStarted)}`);
}
