/**
 * serve's status page behind its own read-only credential, on a real serve process reading the real test clusters:
 * the intake's write token opens no page and the page's token sends no change; secrets shorter than 32 characters
 * and a missing page credential stop serve at start-up; a browser's Basic prompt works from loopback; and a peer
 * that keeps guessing is answered 429 with Retry-After at once (even with the right token) until its minute ends,
 * while /healthz stays open.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BEARER_TOKEN, STATUS_TOKEN } from '../secrets.ts';
import { cluster, repoRootDir, spawnServe, type ServeChild } from './support.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-status-credential-'));
const routesFile = join(dir, 'routes.yaml');
const baseEnv = {
  HOME: dir,
  VAULT_ROLLOUT_STATE_DB: join(dir, 'rotations.sqlite'),
  POWERTOOLS_LOG_LEVEL: 'SILENT',
  POWERTOOLS_METRICS_DISABLED: 'true',
};
let serve: ServeChild;

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: app
    match: { path: "secret/credential/{app}" }
    targets: [{ clusters: [alpha], namespace: vr-status-credential, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  serve = await spawnServe({
    routesFile,
    queueFile: join(dir, 'queue.sqlite'),
    args: ['--status-page'],
    env: { ...baseEnv, VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN, VAULT_ROLLOUT_STATUS_TOKEN: STATUS_TOKEN },
  });
}, 180_000);
afterAll(() => {
  serve?.child.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

/** serve run to its exit (it refuses to start): its exit code and what it said. */
function serveExit(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; err: string }> {
  const child = spawn(
    process.execPath,
    [join(repoRootDir, 'lib/cli/main.ts'), 'serve', '--routes', routesFile, '--port', '0', '--dry-run', ...args],
    { cwd: repoRootDir, env: { PATH: process.env.PATH, ...baseEnv, ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, err })));
}

const page = (headers: Record<string, string> = {}) => fetch(`http://127.0.0.1:${serve.port}/status`, { headers });
const basic = (password: string) => `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;

describe('serve --status-page', () => {
  it(
    "refuses to start with a short intake secret, a short status token, the intake's token as the page's, or none",
    { timeout: 60_000 },
    async () => {
      const short = await serveExit({ VAULT_ROLLOUT_WEBHOOK_TOKEN: 'only-twenty-chars-xx' });
      expect(short.code).toBe(1);
      expect(short.err).toContain('VAULT_ROLLOUT_WEBHOOK_TOKEN is 20 characters, fewer than 32');
      const shortStatus = await serveExit(
        { VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN, VAULT_ROLLOUT_STATUS_TOKEN: 'status-page' },
        ['--status-page'],
      );
      expect(shortStatus.err).toContain('VAULT_ROLLOUT_STATUS_TOKEN is 11 characters, fewer than 32');
      const reused = await serveExit(
        { VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN, VAULT_ROLLOUT_STATUS_TOKEN: BEARER_TOKEN },
        ['--status-page'],
      );
      expect(reused.code).toBe(1);
      expect(reused.err).toContain("VAULT_ROLLOUT_STATUS_TOKEN is the intake's secret");
      const none = await serveExit({ VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN }, ['--status-page']);
      expect(none.code).toBe(1);
      expect(none.err).toContain('--status-page: set VAULT_ROLLOUT_STATUS_TOKEN');
      for (const r of [short, shortStatus, reused, none]) expect(r.err).not.toContain(BEARER_TOKEN);
    },
  );

  it("opens the page to the status token only (Bearer, or Basic from loopback), and the intake to the intake's token only", async () => {
    expect((await page({ authorization: `Bearer ${BEARER_TOKEN}` })).status).toBe(401);
    const ok = await page({ authorization: `Bearer ${STATUS_TOKEN}` });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('<!DOCTYPE html>');
    expect((await page({ authorization: basic(STATUS_TOKEN) })).status).toBe(200);
    const audit = (token: string) =>
      fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
        method: 'POST',
        body: '{}',
        headers: { authorization: `Bearer ${token}` },
      });
    expect((await audit(STATUS_TOKEN)).status).toBe(401);
    expect((await audit(BEARER_TOKEN)).status).toBe(202);
  });

  it('answers a guessing peer 429 with Retry-After at once, even with the right token; /healthz stays open', async () => {
    let status = 401;
    let tries = 0;
    while (status === 401 && tries < 100) {
      status = (await page({ authorization: `Bearer guess-${tries}` })).status;
      tries++;
    }
    expect(status).toBe(429);
    expect(tries).toBeLessThanOrEqual(21);
    const blocked = await page({ authorization: `Bearer ${STATUS_TOKEN}` });
    expect(blocked.status).toBe(429);
    const retryAfter = Number(blocked.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await blocked.text()).not.toContain('<!DOCTYPE html>');
    expect((await fetch(`http://127.0.0.1:${serve.port}/healthz`)).status).toBe(200);
  });
});
