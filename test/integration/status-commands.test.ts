/**
 * The commands the status page suggests are safe to paste, on the real test clusters: tenants write the record keys
 * status reads on their own objects, so a key like `secret/tenant/api/x$(touch pwned)` on 26 Deployments a route
 * targets (one more than the page lists) must come out as one quoted word of a `status --path … --json` command, and
 * the same key on Deployments no route targets must not be listed at all. Every command the page shows is run by a
 * real shell, with `vault-rollout` replaced by a function that prints its arguments: nothing else runs, and the path arrives
 * whole.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { memoryIo } from '../helpers.ts';
import { cluster, createNamespace, createWorkload, deleteNamespace, uniqueName } from './support.ts';

const NS = uniqueName('vr-status-cmd');
const dir = mkdtempSync(join(tmpdir(), 'vr-status-cmd-'));
const KEY = 'secret/tenant/api/x$(touch pwned)';
const ROUTED = 26;
const routes = `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: tenant
    match: { path: "secret/tenant/**" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, selector: "team=payments" }]
`;

/** The pod template of Deployment `app` (its selector is app=<name>), recording the tenant's key. */
const template = (app: string) => ({
  metadata: { labels: { app }, annotations: { 'vault-rollout.io/versions': JSON.stringify({ [KEY]: 1 }) } },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

beforeAll(async () => {
  await createNamespace('alpha', NS);
  await Promise.all([
    ...Array.from({ length: ROUTED }, (_, i) =>
      createWorkload(
        'alpha',
        NS,
        'Deployment',
        `routed-${i}`,
        { labels: { team: 'payments' } },
        { replicas: 1, template: template(`routed-${i}`) },
      ),
    ),
    ...Array.from({ length: 3 }, (_, i) =>
      createWorkload(
        'alpha',
        NS,
        'Deployment',
        `unrouted-${i}`,
        { labels: { team: 'elsewhere' } },
        { replicas: 1, template: template(`unrouted-${i}`) },
      ),
    ),
  ]);
}, 180_000);
afterAll(async () => {
  await deleteNamespace('alpha', NS);
  rmSync(dir, { recursive: true, force: true });
});

const unescapeHtml = (s: string): string =>
  s
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** What a shell makes of a pasted command, run in `dir`: vault-rollout's arguments (the command word a function). */
const pasted = (command: string): string[] =>
  execFileSync('sh', ['-c', `args() { printf '%s\\0' "$@"; }\n${command.replace(/^vault-rollout /, 'args ')}`], {
    cwd: dir,
    encoding: 'utf8',
  })
    .split('\0')
    .slice(0, -1);

describe('the commands the status page suggests', () => {
  it(
    "carry a tenant's record key as one quoted word that a shell never runs, and list only the consumers the routes target",
    { timeout: 120_000 },
    async () => {
      const io = memoryIo({ 'routes.yaml': routes });
      await main(['status', '--routes', 'routes.yaml', '--cluster', 'alpha', '--output', 'html'], io);
      const page = io.out;
      expect(page).toContain('1 more consumers of this path');
      expect(page).not.toContain('unrouted-');
      const commands = [...page.matchAll(/<code class="cmd">([^<]*)<\/code>/g)].map((m) => unescapeHtml(m[1] ?? ''));
      expect(commands).toEqual([`vault-rollout status --path 'secret/tenant/api/x$(touch pwned)' --json`]);
      for (const command of commands) expect(pasted(command)).toEqual(['status', '--path', KEY, '--json']);
      expect(existsSync(join(dir, 'pwned'))).toBe(false);
    },
  );
});
