// Vitest globalSetup for the integration project: provides every real component before any test file runs —
// the Kubernetes binaries (built on first use) and the three local clusters of this process's lane (test/lanes.ts),
// then OpenBao and Vault, helm and the container image (test/components.ts) — and stops the clusters afterwards, but
// only if this run started them; clusters already running (`npm run clusters:up`) are left.
//
// Never skips: if a component cannot be built or a cluster does not become ready, this throws and the run fails.
import { down, up } from './clusters/clusters.ts';
import { prepareComponents } from './components.ts';

export default async function setup(): Promise<() => Promise<void>> {
  const result = await up();
  await prepareComponents();
  return async () => {
    if (result.started) await down();
  };
}
