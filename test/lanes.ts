/**
 * Test lanes: `npm test` runs the integration files in two vitest processes at once, each on its own set of test
 * clusters, because most of their time is spent waiting on real rollouts, visibility timeouts and restarts rather
 * than computing (see test/run-suite.ts). VAULT_ROLLOUT_TEST_LANE picks the lane of a process:
 *   unset — every integration file, on the clusters under .local/ (what a developer's `vitest run` gets);
 *   a     — every integration file but lane b's, on the clusters under .local/;
 *   b     — LANE_B_FILES only, on clusters of their own under .local/lane-b/ (ports: its own
 *           VAULT_ROLLOUT_CLUSTERS_PORT_BASE, set by the runner);
 *   c     — COMPATIBILITY_FILES (and LANE_C_BALANCE_FILES), on clusters of the oldest Kubernetes minor EKS still supports
 *           (COMPATIBILITY_KUBERNETES_VERSION), under .local/lane-c/: the compatibility lane.
 * Lanes a and b run the newest Kubernetes (KUBERNETES_VERSION); the files of lane c run in lane a too.
 * Imported by vitest.config.ts, the clusters and the hygiene capture: nothing here may import test code.
 */
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/**
 * The slowest files, waiting more than computing: a share of the suite's wall time each lane can wait through
 * beside the other (figures of 2026-11-27 in a clean clone: serve-kill 340 s, continuations 320 s, faults 156 s,
 * rollout-health 85 s, of ~1,660 s of integration files). Lane a also runs the unit project first.
 */
export const LANE_B_FILES = [
  'test/integration/serve-kill.test.ts',
  'test/integration/continuations.test.ts',
  'test/integration/faults.test.ts',
  'test/integration/rollout-health.test.ts',
  'test/integration/vault-auth.test.ts',
  // Balance: lane a took 1,178 s and lane b 866 s in the run of 3816f3d.
  'test/integration/notifications.test.ts',
  'test/integration/metrics.test.ts',
  // Every benchmark at its tiny size (minutes of building bundles and starting stacks): beside lane a, not in it.
  'test/integration/bench-tiny.test.ts',
] as const;

/**
 * Files that start no cluster and read none (packaging, the Vault servers, the AWS emulators, the docs site): they
 * run in lane c, beside its few compatibility files, because lane a is the longest. The matrix lists them under no
 * Kubernetes version. Without lane c in the run they stay in lane a.
 */
export const CLUSTER_FREE_FILES = [
  'test/integration/package.test.ts',
  'test/integration/npm-package.test.ts',
  'test/integration/fresh-clone.test.ts',
  'test/integration/first-deploy.test.ts',
  'test/integration/docs-site.test.ts',
  'test/integration/executable-docs.test.ts',
  'test/integration/vault-server.test.ts',
  'test/integration/vault-metadata.test.ts',
  'test/integration/sqs-queue.test.ts',
  'test/integration/slot-store.test.ts',
  'test/integration/rotation-store.test.ts',
  'test/integration/eks-token.awscli.test.ts',
] as const;

/**
 * Files that need clusters but no particular version, run in lane c only (on its older Kubernetes, which they must
 * pass too) when lane c is in the run: lane a is the longest, lane c has room beside its compatibility files.
 */
export const LANE_C_BALANCE_FILES: readonly string[] = [
  // Lane a took 1,208 s and lane c 909 s in the run of 8f2b8a9; these three wait on real time (a window's opening,
  // a gate's approval, a slow server's rollout) for about 200 s between them.
  'test/integration/maintenance-windows.test.ts',
  'test/integration/approval-gates.test.ts',
  'test/integration/restart-order.test.ts',
];

/** The lanes of this run (VAULT_ROLLOUT_TEST_LANES, set for every lane's process by test/run-suite.ts). */
export const lanesInRun = (env: NodeJS.ProcessEnv = process.env): string[] =>
  (env.VAULT_ROLLOUT_TEST_LANES ?? 'a,b,c').split(',');

/**
 * What the second, older Kubernetes minor must pass: rollouts of every kind, rollout health, the admission policy
 * (ValidatingAdmissionPolicy, GA since 1.30), server-side dry-run (in rollouts and clusters), status, and the
 * clusters' own checks (RBAC, TokenRequest, CRDs).
 */
export const COMPATIBILITY_FILES = [
  'test/integration/clusters.test.ts',
  'test/integration/rollouts.test.ts',
  'test/integration/rollout-health.test.ts',
  'test/integration/admission-policy.test.ts',
  'test/integration/status.test.ts',
] as const;

const kubernetesVersion = (name: string, fallback: string): string => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^v1\.\d{2}\.\d{1,2}$/.test(raw))
    throw new Error(`${name}=${raw}: expected a Kubernetes version such as ${fallback}`);
  return raw;
};
/** The newest Kubernetes on the module proxy: the main clusters (lanes a and b). VAULT_ROLLOUT_KUBERNETES_VERSION tries another. */
export const KUBERNETES_VERSION = kubernetesVersion('VAULT_ROLLOUT_KUBERNETES_VERSION', 'v1.37.2');
/** The oldest minor EKS still supports (extended support): the compatibility lane c. VAULT_ROLLOUT_COMPATIBILITY_KUBERNETES_VERSION tries another. */
export const COMPATIBILITY_KUBERNETES_VERSION = kubernetesVersion(
  'VAULT_ROLLOUT_COMPATIBILITY_KUBERNETES_VERSION',
  'v1.32.13',
);

export type TestLane = 'a' | 'b' | 'c' | undefined;

export function testLane(env: NodeJS.ProcessEnv = process.env): TestLane {
  const raw = env.VAULT_ROLLOUT_TEST_LANE;
  if (raw === undefined || raw === '') return undefined;
  if (raw === 'a' || raw === 'b' || raw === 'c') return raw;
  throw new Error(`VAULT_ROLLOUT_TEST_LANE=${raw}: expected a, b or c (or unset for every file)`);
}

const lane = testLane();
/** Where a lane keeps its clusters' state, the clusters lock, the captured test output and its servers ledger. */
export const laneLocalDir = (of: TestLane): string =>
  of === 'b' || of === 'c' ? join(ROOT, '.local', `lane-${of}`) : join(ROOT, '.local');
export const LANE_LOCAL_DIR = laneLocalDir(lane);
/** The Vault and OpenBao servers each test file of a lane started (test/vault/server.ts), for the compatibility matrix. */
export const serversLedger = (of: TestLane = lane): string => join(laneLocalDir(of), 'servers-used.jsonl');
/** The Kubernetes version of this lane's clusters. */
export const LANE_KUBERNETES_VERSION = lane === 'c' ? COMPATIBILITY_KUBERNETES_VERSION : KUBERNETES_VERSION;
/**
 * Where this lane's kube-apiserver, kube-controller-manager and kube-scheduler are, under .local/bin (linked there
 * by test/clusters/build-binaries.sh): the main version at the top, the compatibility version in a folder of its own.
 */
export const LANE_KUBERNETES_BIN_SUBDIR = lane === 'c' ? `kubernetes-${COMPATIBILITY_KUBERNETES_VERSION}` : '';
