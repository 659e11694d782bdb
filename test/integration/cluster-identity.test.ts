/**
 * How vault-rollout proves who it is to a real test cluster: kubectl's tokenFile (refused unless the operator allows
 * it, never an anonymous call), an exec credential plugin (a small script printing an ExecCredential) in the CLI and
 * in `serve`, run once per token lifetime, `inCluster: true` with a ServiceAccount token (TokenRequest API) that is
 * replaced while `serve` runs, the old one revoked, and the pod's own token never sent to another server.
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { client, waitFor } from '../clusters/kube-http.ts';
import { issueCert, writeCa } from '../clusters/pki.ts';
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  spawnServe,
  uniqueName,
  type ServeChild,
} from './support.ts';

const NS = uniqueName('vr-identity');
const SA_NAMESPACE = 'vault-rollout';
const SA = 'vault-rollout';
const dir = mkdtempSync(join(tmpdir(), 'vr-identity-'));
const BEARER = BEARER_TOKEN;
const SLOW = { timeout: 180_000 };

/** A ServiceAccount token for vault-rollout/vault-rollout, bound to a Secret of its own: deleting the Secret revokes it. */
async function boundToken(): Promise<{ token: string; secret: string }> {
  const kube = admin('alpha');
  const secret = uniqueName('vr-token-binding');
  const created = await kube.request<{ metadata: { uid: string } }>(
    'POST',
    `/api/v1/namespaces/${SA_NAMESPACE}/secrets`,
    { body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: secret } } },
  );
  expect(created.status).toBe(201);
  const res = await kube.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${SA_NAMESPACE}/serviceaccounts/${SA}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          expirationSeconds: 600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secret, uid: created.body.metadata.uid },
        },
      },
    },
  );
  expect(res.status).toBe(201);
  return { token: res.body.status.token, secret };
}

const whoAmI = async (token: string): Promise<number> =>
  (
    await client(cluster('alpha').server, { ca: readFileSync(cluster('alpha').caFile), token }).request(
      'POST',
      '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
    )
  ).status;

/** The exec plugin: counts its runs in `runs`, prints the token of `token` with an expiry ten minutes ahead. */
function writePlugin(): string {
  const pluginDir = join(dir, 'bin');
  const script = join(pluginDir, 'vr-identity-plugin');
  mkdirSync(pluginDir, { recursive: true });
  writeFileSync(join(dir, 'runs'), '');
  writeFileSync(
    script,
    `#!/bin/sh
echo run >> "${dir}/runs"
expiry=$(date -u -d '+10 min' +%Y-%m-%dT%H:%M:%SZ)
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' "$(cat "${dir}/token")" "$expiry"
`,
  );
  chmodSync(script, 0o755);
  return pluginDir;
}
const runs = (): number => readFileSync(join(dir, 'runs'), 'utf8').split('\n').filter(Boolean).length;

/** A kubeconfig file `<file>.kubeconfig` for alpha whose only user, `name`, is `user` (the fields under `users[].user`). */
function alphaKubeconfig(fileName: string, name: string, user: Record<string, unknown>): string {
  const c = cluster('alpha');
  const file = join(dir, `${fileName}.kubeconfig`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'alpha',
      clusters: [{ name: 'alpha', cluster: { server: c.server, 'certificate-authority': c.caFile } }],
      contexts: [{ name: 'alpha', context: { cluster: 'alpha', user: name } }],
      users: [{ name, user }],
    }),
    { mode: 0o600 },
  );
  return file;
}
const execKubeconfig = (): string =>
  alphaKubeconfig('exec', 'plugin', {
    exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'vr-identity-plugin', interactiveMode: 'Never' },
  });
const tokenFileKubeconfig = (tokenPath: string): string =>
  alphaKubeconfig('token-file', 'from-file', { tokenFile: tokenPath });

const routes = (alpha: string) => `clusters:
  alpha: ${alpha}
vault: { mounts: { secret: 2 } }
routes:
  - name: identity
    match: { path: "secret/identity/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`;
let version = 0;
const write = (app: string) =>
  JSON.stringify({
    time: '2026-11-27T12:00:00Z',
    type: 'response',
    request: {
      id: `identity-${++version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/identity/${app}`,
    },
    response: { data: { version } },
  });
const restartedVersion = async (app: string): Promise<string | undefined> =>
  (await getWorkload('alpha', NS, 'Deployment', app)).spec.template?.metadata?.annotations?.[
    'vault-rollout.io/versions'
  ];

beforeAll(async () => {
  await createNamespace('alpha', NS);
  for (const app of ['api', 'worker', 'web']) await createWorkload('alpha', NS, 'Deployment', app);
}, 180_000);
afterAll(async () => {
  await deleteNamespace('alpha', NS);
  rmSync(dir, { recursive: true, force: true });
});

describe("kubectl's tokenFile", () => {
  it(
    'is refused with the cluster, the field and the way out (it used to call the cluster as system:anonymous), and works when the operator allows it',
    SLOW,
    async () => {
      const { token } = await boundToken();
      writeFileSync(join(dir, 'sa-token'), token, { mode: 0o600 });
      const kubeconfig = tokenFileKubeconfig(join(dir, 'sa-token'));
      // The routing table's allowTokenFile no longer grants it: the table's writer is not the operator.
      let io = memoryIo({
        'routes.yaml': routes(`{ kubeconfig: { file: ${JSON.stringify(kubeconfig)}, allowTokenFile: true } }`),
      });
      expect(await main(['doctor', '--routes', 'routes.yaml'], io)).toBe(1);
      expect(io.out).toContain(
        `alpha: credentials: cluster alpha: kubeconfig file ${kubeconfig}: user from-file: tokenFile ${join(dir, 'sa-token')} is refused`,
      );
      expect(io.out).toContain('set VAULT_ROLLOUT_ALLOW_TOKEN_FILE=alpha');
      expect(io.out).not.toContain('system:anonymous');

      io = memoryIo(
        { 'routes.yaml': routes(`{ kubeconfig: { file: ${JSON.stringify(kubeconfig)} } }`) },
        { VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'alpha' },
      );
      await main(['doctor', '--routes', 'routes.yaml'], io);
      expect(io.out).toMatch(new RegExp(`alpha\\s+identity\\s+ok\\s+system:serviceaccount:${SA_NAMESPACE}:${SA} `));
    },
  );
});

/** An HTTPS server with a CA of its own that records every Authorization header it is sent. */
async function recordingServer(): Promise<{ url: string; caFile: string; seen: string[]; close: () => Promise<void> }> {
  const pki = join(dir, 'elsewhere-pki');
  mkdirSync(pki, { recursive: true });
  const ca = writeCa(pki, 'elsewhere-ca');
  const leaf = issueCert(pki, ca, { name: 'server', commonName: '127.0.0.1', sans: ['IP:127.0.0.1'], usage: 'server' });
  const seen: string[] = [];
  const server = createServer({ key: readFileSync(leaf.keyFile), cert: readFileSync(leaf.certFile) }, (req, res) => {
    seen.push(req.headers.authorization ?? '');
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"kind":"Status","code":401}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    caFile: ca.certFile,
    seen,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe("the pod's own ServiceAccount token in a kubeconfig", () => {
  it(
    "is never sent to another server, even with every opt-in, and reaches the in-cluster API with the pod's CA",
    SLOW,
    async () => {
      const saDir = join(dir, 'pod-serviceaccount');
      mkdirSync(saDir, { recursive: true });
      writeFileSync(join(saDir, 'ca.crt'), readFileSync(cluster('alpha').caFile));
      const { token } = await boundToken();
      writeFileSync(join(saDir, 'token'), token, { mode: 0o600 });
      const alpha = new URL(cluster('alpha').server);
      const pod = {
        KUBERNETES_SERVICE_HOST: alpha.hostname,
        KUBERNETES_SERVICE_PORT: alpha.port,
        VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR: saDir,
        VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'alpha',
      };
      const elsewhere = await recordingServer();
      try {
        // A remote cluster's kubeconfig, written by someone else, naming the pod's token and their own server.
        const file = join(dir, 'elsewhere.kubeconfig');
        writeFileSync(
          file,
          JSON.stringify({
            apiVersion: 'v1',
            kind: 'Config',
            'current-context': 'x',
            clusters: [{ name: 'x', cluster: { server: elsewhere.url, 'certificate-authority': elsewhere.caFile } }],
            contexts: [{ name: 'x', context: { cluster: 'x', user: 'pod' } }],
            users: [{ name: 'pod', user: { tokenFile: join(saDir, 'token') } }],
          }),
          { mode: 0o600 },
        );
        let io = memoryIo(
          { 'routes.yaml': routes(`{ kubeconfig: { file: ${JSON.stringify(file)}, allowTokenFile: true } }`) },
          pod,
        );
        expect(await main(['doctor', '--routes', 'routes.yaml'], io)).toBe(1);
        expect(io.out).toContain(
          "is refused: it is the pod's own ServiceAccount token, which goes only to the in-cluster API server",
        );
        expect(elsewhere.seen.filter((h) => h.includes(token))).toEqual([]);
        expect(io.out + io.err).not.toContain(token);

        // The same token to the in-cluster API (its address, its CA) needs no opt-in.
        const home = alphaKubeconfig('pod-home', 'pod', { tokenFile: join(saDir, 'token') });
        const { VAULT_ROLLOUT_ALLOW_TOKEN_FILE: _optIn, ...withoutOptIn } = pod;
        io = memoryIo({ 'routes.yaml': routes(`{ kubeconfig: { file: ${JSON.stringify(home)} } }`) }, withoutOptIn);
        await main(['doctor', '--routes', 'routes.yaml'], io);
        expect(io.out).toMatch(new RegExp(`alpha\\s+identity\\s+ok\\s+system:serviceaccount:${SA_NAMESPACE}:${SA} `));
      } finally {
        await elsewhere.close();
      }
    },
  );
});

describe('an exec credential plugin', () => {
  it('works in the CLI, and runs once for every request of a command', SLOW, async () => {
    writeFileSync(join(dir, 'token'), (await boundToken()).token);
    const pluginDir = writePlugin();
    const table = routes(`{ kubeconfig: { file: ${JSON.stringify(execKubeconfig())} } }`);
    const env = { PATH: `${pluginDir}:/usr/bin:/bin`, VAULT_ROLLOUT_ALLOW_EXEC: 'alpha' };
    let io = memoryIo({ 'routes.yaml': table }, env);
    await main(['doctor', '--routes', 'routes.yaml'], io);
    expect(io.out).toMatch(new RegExp(`alpha\\s+identity\\s+ok\\s+system:serviceaccount:${SA_NAMESPACE}:${SA} `));
    expect(runs()).toBe(1);

    writeFileSync(join(dir, 'runs'), '');
    io = memoryIo({ 'routes.yaml': table, '-': [write('api'), write('worker'), write('web')].join('\n') }, env);
    expect(await main(['apply', '--routes', 'routes.yaml'], io), `${io.out}\n${io.err}`).toBe(0);
    expect(io.out).toContain('Results: 3 restarted');
    expect(runs()).toBe(1);

    // Without the operator's opt-in, the same kubeconfig is refused, saying how to allow it; the table cannot.
    io = memoryIo(
      { 'routes.yaml': routes(`{ kubeconfig: { file: ${JSON.stringify(execKubeconfig())}, allowExec: true } }`) },
      { PATH: env.PATH },
    );
    expect(await main(['doctor', '--routes', 'routes.yaml'], io)).toBe(1);
    expect(io.out).toContain(
      'user plugin: exec (the credential plugin vr-identity-plugin) runs only when the operator allows it for this cluster: set VAULT_ROLLOUT_ALLOW_EXEC=alpha',
    );
  });

  it('works in serve: several changes, one plugin run', SLOW, async () => {
    writeFileSync(join(dir, 'token'), (await boundToken()).token);
    const pluginDir = writePlugin();
    writeFileSync(
      join(dir, 'routes-exec.yaml'),
      routes(`{ kubeconfig: { file: ${JSON.stringify(execKubeconfig())} } }`),
    );
    const serve = await startServe(
      join(dir, 'routes-exec.yaml'),
      { PATH: `${pluginDir}:${process.env.PATH ?? ''}`, VAULT_ROLLOUT_ALLOW_EXEC: 'alpha' },
      'exec',
    );
    try {
      for (const app of ['api', 'worker', 'web']) {
        const before = await restartedVersion(app);
        const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
          method: 'POST',
          body: write(app),
          headers: { authorization: `Bearer ${BEARER}` },
        });
        expect(res.status).toBe(202);
        await waitFor(async () => (await restartedVersion(app)) !== before, {
          timeoutMs: 60_000,
          what: `${app} restarted by serve`,
        });
      }
      expect(runs()).toBe(1);
    } finally {
      await stop(serve.child);
    }
  });
});

describe('inCluster: true', () => {
  it(
    "restarts through the pod's ServiceAccount token, and keeps working after the token file is replaced and the old token revoked",
    SLOW,
    async () => {
      const saDir = join(dir, 'serviceaccount');
      mkdirSync(saDir, { recursive: true });
      writeFileSync(join(saDir, 'ca.crt'), readFileSync(cluster('alpha').caFile));
      const first = await boundToken();
      writeFileSync(join(saDir, 'token'), first.token);
      writeFileSync(join(dir, 'routes-in-cluster.yaml'), routes('{ inCluster: true }'));
      const server = new URL(cluster('alpha').server);
      const serve = await startServe(
        join(dir, 'routes-in-cluster.yaml'),
        {
          KUBERNETES_SERVICE_HOST: server.hostname,
          KUBERNETES_SERVICE_PORT: server.port,
          VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR: saDir,
        },
        'in-cluster',
      );
      const restartThroughServe = async (app: string) => {
        const before = await restartedVersion(app);
        const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
          method: 'POST',
          body: write(app),
          headers: { authorization: `Bearer ${BEARER}` },
        });
        expect(res.status).toBe(202);
        await waitFor(async () => (await restartedVersion(app)) !== before, {
          timeoutMs: 60_000,
          what: `${app} restarted by serve`,
        });
      };
      try {
        await restartThroughServe('api');

        // The kubelet's way: a new file renamed over the old one. Then the old token is revoked.
        const second = await boundToken();
        writeFileSync(join(saDir, 'token.new'), second.token);
        renameSync(join(saDir, 'token.new'), join(saDir, 'token'));
        expect(
          (await admin('alpha').request('DELETE', `/api/v1/namespaces/${SA_NAMESPACE}/secrets/${first.secret}`)).status,
        ).toBe(200);
        await waitFor(async () => (await whoAmI(first.token)) === 401, {
          timeoutMs: 30_000,
          what: 'the first token revoked',
        });
        expect(await whoAmI(second.token)).toBe(201);

        await restartThroughServe('worker');
      } finally {
        await stop(serve.child);
      }
    },
  );
});

const startServe = (routesFile: string, env: Record<string, string>, lane: string): Promise<ServeChild> =>
  spawnServe({
    routesFile,
    queueFile: join(dir, `queue-${lane}.sqlite`),
    env: {
      HOME: dir,
      VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER,
      POWERTOOLS_LOG_LEVEL: 'WARN',
      POWERTOOLS_METRICS_DISABLED: 'true',
      VAULT_ROLLOUT_FOLLOW_SECONDS: '0',
      ...env,
    },
  });

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  await exited;
}
