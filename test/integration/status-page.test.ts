/**
 * The fleet status page in a real headless Chromium (Debian's package), on the real test clusters,
 * during a rotation with waves and a halt: `serve --status-page` works two secrets through three waves (gamma, then
 * alpha, then beta; gate `healthy`, a 30 s pause, onFailure halt). `held`'s version-2 pods never become Ready in
 * gamma, so its gate halts at wave 1; `good` passes wave 1 and waits out the pause. A third workload records a path
 * whose name is markup (anyone who may edit a workload can write that annotation). What the page shows is read from
 * Chromium's DOM (`innerText`, computed layout), the screenshots in docs/how-to/status-page.md are taken here, and the command the
 * page gives to resume the halt is run and the page checked again. `status --output html --file` writes the same
 * page from the same store and clusters.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN, STATUS_TOKEN } from '../secrets.ts';
import { ensureDebianChromium, launchChromium, type Browser } from './chromium.ts';
import {
  createNamespace,
  createWorkload,
  deleteNamespace,
  repoRootDir,
  spawnServe,
  uniqueName,
  type ServeChild,
} from './support.ts';
import { clustersYaml, deployGoodAndHeld, kvWriteAudit, podTemplate, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-status-page');
const CLUSTERS = ['gamma', 'alpha', 'beta'] as const;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-status-page-'));
const stateDb = join(dir, 'state', 'rotations.sqlite');
const routesFile = join(dir, 'routes.yaml');
/** A record key that is markup: shown as text, never run (it would retitle the page). */
const XSS_PATH = `secret/status/<img src=x onerror="document.title='pwned'">`;
/**
 * Where the screenshots go: always taken; into docs/images (the docs') only when asked, so that a test run leaves
 * the work tree as it found it (a changed tracked file would mark the image built in the same run `-dirty`).
 */
const shots =
  process.env.VAULT_ROLLOUT_UPDATE_SCREENSHOTS === '1'
    ? join(repoRootDir, 'docs/images')
    : join(repoRootDir, '.local/test-output/status-page');
let serve: ServeChild;
let browser: Browser | undefined;

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(CLUSTERS)}
vault: { mounts: { secret: 2 } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }, { clusters: [beta] }]
  gate: { healthy: true, timeout: 60s, pause: 30s }
  onFailure: halt
routes:
  - name: status
    match: { path: "secret/status/{app}" }
    rollout: { timeout: 6s }
    targets: [{ clusters: [gamma, alpha, beta], namespace: ${NS}, names: [good, held], kind: Deployment, name: "{app}" }]
`,
  );
  await Promise.all(CLUSTERS.map((c) => createNamespace(c, NS)));
  // `tenant` records a path whose name is markup; it is not waited for (nothing restarts it).
  await createWorkload(
    'gamma',
    NS,
    'Deployment',
    'tenant',
    {},
    {
      replicas: 1,
      template: podTemplate('tenant', { 'vault-rollout.io/versions': JSON.stringify({ [XSS_PATH]: 1 }) }),
    },
  );
  // `held`: its version-2 pods never become Ready in gamma (the first wave).
  await deployGoodAndHeld(NS, CLUSTERS, 'gamma', 'secret/status/held');
  serve = await spawnServe({
    routesFile,
    queueFile: join(dir, 'queue.sqlite'),
    args: ['--status-page', '--status-refresh', '5s'],
    listenTimeoutMs: 180_000,
    env: serveEnv(dir, stateDb, { VAULT_ROLLOUT_STATUS_TOKEN: STATUS_TOKEN }),
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  serve?.child.kill('SIGTERM');
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
});

const auditLine = (app: string, version: number) =>
  kvWriteAudit(`status-page-${app}-${version}`, `secret/status/${app}`, version);
const auth = { authorization: `Bearer ${BEARER_TOKEN}` };
/** The page's own read-only credential: the intake's token is not taken there. */
const pageAuth = { authorization: `Bearer ${STATUS_TOKEN}` };
const cli = (args: string[]) =>
  spawnSync(process.execPath, [join(repoRootDir, 'lib/cli/main.ts'), ...args], {
    cwd: repoRootDir,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: dir, VAULT_ROLLOUT_STATE_DB: stateDb },
  });

describe('the status page in Chromium', () => {
  it('shows the halt with its reason and resume command, the waves and gate of the rotation in progress, escaped, on a desktop and a phone', async () => {
    const version = ensureDebianChromium();
    for (const app of ['good', 'held']) {
      const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
        method: 'POST',
        body: `${auditLine(app, 2)}\n`,
        headers: auth,
      });
      expect(res.status).toBe(202);
    }
    const url = `http://127.0.0.1:${serve.port}/status`;
    // The moment to look: held halted at wave 1, good's wave 1 complete and its gate pausing (30 s) before alpha.
    let last = '';
    await waitFor(
      async () => {
        last = (await (await fetch(url, { headers: pageAuth })).text()).replace(/<[^>]*>/g, '');
        return (last.includes('Halted rotations (1)') && /complete wave 1: gamma \(1 of 1/.test(last)) || undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1_000, what: 'held halted at wave 1 and good complete in gamma' },
    ).catch((e: unknown) => {
      throw new Error(
        `${e instanceof Error ? e.message : String(e)}; the page said:\n${last.replace(/\n\s*\n/g, '\n').slice(0, 4000)}`,
      );
    });

    browser = await launchChromium();
    const desktop = await browser.newPage({ width: 1200, height: 900 }, pageAuth);
    expect(await desktop.goto(url), `Chromium ${version}`).toBe(200);
    const text = await desktop.evaluate<string>('document.body.innerText');
    expect(text).toContain('NOT YET SAFE TO REVOKE');
    // The halt: what, where, why, what was held back, and the exact command that resumes it.
    expect(text).toContain('secret/status/held version 2 halted at wave 1 of 3');
    expect(text).toMatch(new RegExp(`Deployment ${NS}/held in cluster gamma`));
    expect(text).toMatch(/Not restarted\s+alpha, beta/);
    const rotation = /vault-rollout halts clear ([0-9a-f]{8,64})/.exec(text)?.[1];
    expect(rotation).toBeDefined();
    // Rotations in progress: each wave in words, and the gate.
    expect(text).toMatch(/secret\/status\/held\s+HALTED at wave 1 of 3/);
    expect(text).toMatch(/secret\/status\/good\s+at wave 2 of 3/);
    expect(text).toContain(
      'gate: every target of a wave rolled out within 1 min, then a pause of 30 s; on failure: halt',
    );
    expect(text).toMatch(/complete wave 1: gamma \(1 of 1 consumers current and rolled out\)/);
    expect(text).toMatch(/waiting wave 2: alpha/);
    expect(text).toMatch(/held back wave 2: alpha/);
    // Per path: the version running per cluster and workload, states in words.
    expect(text).toMatch(new RegExp(`gamma\\s+${NS}/Deployment/held\\s+2\\s+HALTED`));
    expect(text).toMatch(new RegExp(`alpha\\s+${NS}/Deployment/good\\s+-\\s+BEHIND`));
    // The page refreshes itself and reads as a phone page.
    expect(await desktop.evaluate<string>('document.querySelector(\'meta[http-equiv="refresh"]\').content')).toBe('5');
    expect(await desktop.evaluate<string>('document.querySelector(\'meta[name="viewport"]\').content')).toBe(
      'width=device-width, initial-scale=1',
    );
    // The markup in a record key is text: shown, never an element, never run.
    expect(text).toContain(XSS_PATH);
    expect(await desktop.evaluate<number>('document.querySelectorAll("img, script, svg, iframe").length')).toBe(0);
    expect(await desktop.evaluate<string>('document.title')).toMatch(/need attention · vault-rollout status$/);
    mkdirSync(shots, { recursive: true });
    await desktop.screenshot(join(shots, 'status-page.png'), 2_000);

    // A phone: nothing wider than the screen (tables become one block per row), every state still in words.
    const phone = await browser.newPage({ width: 390, height: 844, mobile: true, deviceScaleFactor: 2 }, pageAuth);
    expect(await phone.goto(url)).toBe(200);
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await phone.evaluate<string>('getComputedStyle(document.querySelector("#paths td")).display')).toBe('block');
    // Each cell says what it is (CSS generated `Label: `), the state a word.
    expect(
      await phone.evaluate<string[]>(
        '[...document.querySelectorAll(\'#paths td[data-label="State"]\')].map((td) => td.innerText)',
      ),
    ).toContain('HALTED');
    expect(
      await phone.evaluate<string>(
        'getComputedStyle(document.querySelector(\'#paths td[data-label="State"]\'), "::before").content',
      ),
    ).toMatch(/data-label|State/);
    await phone.screenshot(join(shots, 'status-page-phone.png'), 1_400);

    // Without the token the browser gets nothing of the fleet.
    const stranger = await browser.newPage({ width: 800, height: 600 });
    expect(await stranger.goto(url)).toBe(401);
    expect(await stranger.evaluate<string>('document.body.innerText')).not.toContain('secret/status');

    // status --output html --file: the same page from the same store and clusters, for teams on Lambda.
    const file = join(dir, 'status.html');
    const written = cli(['status', '--routes', routesFile, '--output', 'html', '--file', file]);
    expect(written.status, written.stderr).toBe(1);
    const local = await browser.newPage({ width: 1200, height: 900 });
    await local.goto(`file://${file}`);
    const fileText = await local.evaluate<string>('document.body.innerText');
    expect(fileText).toContain(`vault-rollout halts clear ${rotation}`);
    expect(fileText).toContain('secret/status/held version 2 halted at wave 1 of 3');
    expect(readFileSync(file, 'utf8')).not.toMatch(/<img/);

    // The command the page gives resumes the rotation; the page stops showing the halt.
    const cleared = cli(['halts', 'clear', rotation as string]);
    expect(cleared.status, cleared.stderr).toBe(0);
    await waitFor(
      async () => {
        await desktop.goto(url);
        return !(await desktop.evaluate<string>('document.body.innerText')).includes('Halted rotations') || undefined;
      },
      { timeoutMs: 30_000, intervalMs: 1_000, what: 'the halt gone from the page' },
    );
  }, 300_000);
});
