/**
 * Vault's Kubernetes auth method for `reconcile` and `status`, against the real OpenBao and the real Vault:
 * their `kubernetes` auth method (on a mount of its own) points at test cluster alpha's API server and reviews
 * tokens with a ServiceAccount bound to system:auth-delegator; vault-rollout logs in with the vault-rollout
 * ServiceAccount's token (TokenRequest API) for Vault's own audience, from a file, as the chart projects it, and
 * nothing else; the API-audience token (the one that can patch) is refused before anything is sent to Vault.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { REPO_ROOT, startDevServer, type ServerKind } from '../vault/server.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-k8s-auth');
const REVIEWER = 'vr-token-reviewer';
const MOUNT = 'k8s-alpha';
const dir = mkdtempSync(join(tmpdir(), 'vr-k8s-auth-'));
const POLICY = readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8');

/** A ServiceAccount token; without audiences, the API server's own (the one a pod's default token has). */
async function tokenOf(namespace: string, serviceAccount: string, audiences?: string[]): Promise<string> {
  const res = await admin('alpha').request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600, ...(audiences ? { audiences } : {}) },
      },
    },
  );
  expect(res.status).toBe(201);
  return res.body.status.token;
}

beforeAll(async () => {
  await createNamespace('alpha', NS);
  const kube = admin('alpha');
  expect(
    (
      await kube.request('POST', `/api/v1/namespaces/${NS}/serviceaccounts`, {
        body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: REVIEWER } },
      })
    ).status,
  ).toBe(201);
  expect(
    (
      await kube.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        body: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: `${NS}:token-reviewer` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
          subjects: [{ kind: 'ServiceAccount', name: REVIEWER, namespace: NS }],
        },
      })
    ).status,
  ).toBe(201);
  writeFileSync(join(dir, 'sa-token'), await tokenOf('vault-rollout', 'vault-rollout', ['vault']), { mode: 0o600 });
  writeFileSync(join(dir, 'api-token'), await tokenOf('vault-rollout', 'vault-rollout'), { mode: 0o600 });
  for (const kind of ['openbao', 'vault'] as const) await createWorkload('alpha', NS, 'Deployment', kind);
}, 180_000);
afterAll(async () => {
  await admin('alpha').request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${NS}:token-reviewer`);
  await deleteNamespace('alpha', NS);
  rmSync(dir, { recursive: true, force: true });
});

const routes = () => {
  const file = join(dir, 'routes.yaml');
  writeFileSync(
    file,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: k8s-auth
    match: { path: "secret/k8s-auth/{app}/db" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  return file;
};

describe.each(['openbao', 'vault'] as const)('Kubernetes auth against %s', (kind: ServerKind) => {
  it('reconcile and status log in with the ServiceAccount token alone', { timeout: 180_000 }, async () => {
    const server = await startDevServer({ kind });
    try {
      const { client } = server;
      await client.writePolicy('vault-rollout-reconcile', POLICY);
      await client.post(`sys/auth/${MOUNT}`, { type: 'kubernetes' });
      await client.post(`auth/${MOUNT}/config`, {
        kubernetes_host: cluster('alpha').server,
        kubernetes_ca_cert: readFileSync(cluster('alpha').caFile, 'utf8'),
        token_reviewer_jwt: await tokenOf(NS, REVIEWER),
        disable_local_ca_jwt: true,
      });
      await client.post(`auth/${MOUNT}/role/vault-rollout`, {
        bound_service_account_names: ['vault-rollout'],
        bound_service_account_namespaces: ['vault-rollout'],
        audience: 'vault',
        token_policies: ['vault-rollout-reconcile'],
        token_ttl: '10m',
      });
      await client.kv2Write('secret', `k8s-auth/${kind}/db`, { password: 'rotated' });

      // Only the Kubernetes variables: no VAULT_TOKEN, no ~/.vault-token (HOME is empty).
      const env = {
        HOME: dir,
        VAULT_K8S_ROLE: 'vault-rollout',
        VAULT_K8S_MOUNT: MOUNT,
        VAULT_K8S_TOKEN_FILE: join(dir, 'sa-token'),
      };
      const file = routes();
      // The pod's API-audience token is refused before anything is sent to Vault.
      const refused = memoryIo({}, { ...env, VAULT_K8S_TOKEN_FILE: join(dir, 'api-token') });
      refused.readText = async (f) => readFileSync(f, 'utf8');
      expect(await main(['reconcile', '--routes', file, '--vault-addr', server.addr], refused)).not.toBe(0);
      expect(refused.out + refused.err).toContain(
        `Kubernetes auth: the token ${join(dir, 'api-token')} is for audience`,
      );
      expect(refused.out + refused.err).not.toContain('logged in to Vault');
      expect(refused.out + refused.err).not.toContain(readFileSync(join(dir, 'api-token'), 'utf8'));
      let io = memoryIo({}, env);
      io.readText = async (f) => readFileSync(f, 'utf8');
      const before = (await getWorkload('alpha', NS, 'Deployment', kind)).metadata.generation;
      expect(await main(['reconcile', '--routes', file, '--vault-addr', server.addr], io), io.out + io.err).toBe(0);
      expect(io.err).toContain('logged in to Vault with Kubernetes');
      expect(io.out).toMatch(
        /Workloads \(1\): 0 current, 0 running the current version \(recorded without a restart\), 1 behind, 0 failed/,
      );
      await waitFor(
        async () => (await getWorkload('alpha', NS, 'Deployment', kind)).metadata.generation !== before || undefined,
        { timeoutMs: 30_000, what: `${kind} restarted` },
      );

      io = memoryIo({}, env);
      io.readText = async (f) => readFileSync(f, 'utf8');
      const code = await main(
        [
          'status',
          '--routes',
          file,
          '--path',
          `secret/k8s-auth/${kind}/db`,
          '--vault-addr',
          server.addr,
          '--wait',
          '--timeout',
          '60s',
        ],
        io,
      );
      expect(io.out, io.err).toContain(`secret/k8s-auth/${kind}/db  Vault current_version 1 (written `);
      expect(code).toBe(0);
      expect(io.out + io.err).not.toContain(readFileSync(join(dir, 'sa-token'), 'utf8'));
    } finally {
      await server.stop();
    }
  });
});
