// Vitest globalSetup for the integration project: provides every real component before any test file runs —
// the Kubernetes binaries (built on first use) and the three local clusters, OpenBao and Vault 1.15, helm (built or
// fetched on first use, so no test waits minutes for a build inside its own timeout), the container image
// (deploy/image/, built into ~/.cache/vault-rollout/image/ when missing) — and stops the clusters
// afterwards, but only if this run started them; clusters already running (`npm run clusters:up`) are left.
//
// Never skips: if a component cannot be built or a cluster does not become ready, this throws and the run fails.
import { down, up } from './clusters/clusters.ts';
import { ensureHelm } from './clusters/helm.ts';
import { imageLayout } from './image/image.ts';
import { ensureServerBinary } from './vault/server.ts';

export default async function setup(): Promise<() => Promise<void>> {
  const result = await up();
  for (const kind of ['openbao', 'vault'] as const) {
    const started = Date.now();
    await ensureServerBinary(kind);
    process.stderr.write(`[vault] ${kind} ready in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  }
  // helm, for the chart's tests (test/integration/helm-chart.test.ts).
  const helmStarted = Date.now();
  await ensureHelm();
  process.stderr.write(`[helm] ready in ${((Date.now() - helmStarted) / 1000).toFixed(1)}s\n`);
  // The container image, for the image's and the chart's tests.
  const imageStarted = Date.now();
  const image = await imageLayout();
  process.stderr.write(`[image] ${image.built ? 'built' : 'reused'} ${image.layout} in ${((Date.now() - imageStarted) / 1000).toFixed(1)}s\n`);
  return async () => {
    if (result.started) await down();
  };
}
