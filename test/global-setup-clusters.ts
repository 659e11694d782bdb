// Vitest globalSetup for the integration project: brings the three local
// clusters up (building the binaries on first use) before any test file runs,
// and stops them afterwards — but only if this run started them; clusters that
// were already running (`npm run clusters:up`) are left running.
//
// Never skips: if the binaries cannot be built or a cluster does not become
// ready, this throws and the run fails.
import { down, up } from './clusters/clusters.ts';

export default async function setup(): Promise<() => Promise<void>> {
  const result = await up();
  return async () => {
    if (result.started) await down();
  };
}
