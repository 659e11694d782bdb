/**
 * Debian's headless Chromium, driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: fd 3 in, fd 4
 * out, one JSON message per NUL), so a test asks the real browser what a page shows (its DOM, `innerText`, computed
 * layout) and takes screenshots — with no npm dependency and no debugging port. Installed here when missing
 * (apt-get, as root), like Debian's awscli in test/unit/aws/eks-token.awscli.test.ts; when that is impossible the
 * test fails and says why, it never skips. Call `ensureDebianChromium` inside the test, not in a hook.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

export const CHROMIUM = '/usr/bin/chromium';

function run(command: string, args: string[]): { ok: boolean; output: string } {
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return {
    ok: result.status === 0,
    output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error?.message ?? ''}`,
  };
}

/** Installs Debian's chromium when /usr/bin/chromium is missing; returns its package version, or throws what to do. */
export function ensureDebianChromium(): string {
  if (!existsSync(CHROMIUM)) {
    const steps: string[] = [];
    for (const [command, args] of [
      ['apt-get', ['update']],
      ['apt-get', ['install', '-y', 'chromium']],
    ] as const) {
      const { ok, output } = run(command, [...args]);
      steps.push(`$ ${command} ${args.join(' ')}\n${output.slice(-800)}`);
      if (!ok) break;
    }
    if (!existsSync(CHROMIUM))
      throw new Error(
        `Debian's chromium is required for the status page test and could not be installed; run \`apt-get install -y chromium\` as root.\n${steps.join('\n')}`,
      );
  }
  const version = run('dpkg-query', ['-W', '-f=${Version}', 'chromium']);
  if (!version.ok) throw new Error(`${CHROMIUM} exists but is not from Debian's chromium package: ${version.output}`);
  return version.output;
}

interface Message {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
  sessionId?: string;
}

export interface Viewport {
  width: number;
  height: number;
  mobile?: boolean;
  deviceScaleFactor?: number;
}

export interface Page {
  /** Navigates and waits for the load event; returns the main document's HTTP status. */
  goto(url: string): Promise<number>;
  /** A JavaScript expression's value in the page (returned by value). */
  evaluate<T>(expression: string): Promise<T>;
  /** A PNG of the page from its top: the whole page up to `maxHeight` CSS pixels. */
  screenshot(file: string, maxHeight?: number): Promise<void>;
}

export interface Browser {
  /**
   * A new tab with this viewport, sending these headers with every request (an Authorization header, say). When a
   * server asks for credentials (401 with WWW-Authenticate), the tab answers as a person pressing Cancel on the
   * browser's prompt would: the 401 page is shown.
   */
  newPage(viewport: Viewport, headers?: Record<string, string>): Promise<Page>;
  close(): Promise<void>;
}

/** Launches headless Chromium with the flags a test wants: no sandbox (root), no network of its own, a fresh profile. */
export async function launchChromium(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'vault-rollout-chromium-'));
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-proxy-server',
    '--hide-scrollbars',
    '--force-color-profile=srgb',
    `--user-data-dir=${profile}`,
    '--remote-debugging-pipe',
    'about:blank',
  ];
  const child: ChildProcess = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const input = child.stdio[3] as Writable;
  const output = child.stdio[4] as Readable;
  let nextId = 1;
  const pending = new Map<number, { resolve: (m: Message) => void; reject: (e: Error) => void }>();
  const listeners = new Set<(m: Message) => void>();
  let buffered = Buffer.alloc(0);
  output.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (let end = buffered.indexOf(0); end >= 0; end = buffered.indexOf(0)) {
      const message = JSON.parse(buffered.subarray(0, end).toString('utf8')) as Message;
      buffered = buffered.subarray(end + 1);
      if (message.id !== undefined) {
        const waiter = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) waiter?.reject(new Error(`DevTools: ${message.error.message}`));
        else waiter?.resolve(message);
      } else for (const l of listeners) l(message);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => {
    for (const w of pending.values()) w.reject(new Error(`chromium exited:\n${stderr}`));
    pending.clear();
  });
  const send = (
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
  ): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: (m) => resolve(m.result ?? {}), reject });
      input.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  const event = (sessionId: string, method: string, timeoutMs: number): Promise<Message> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => (listeners.delete(on), reject(new Error(`no ${method} within ${timeoutMs} ms`))),
        timeoutMs,
      );
      const on = (m: Message) => {
        if (m.sessionId === sessionId && m.method === method) {
          clearTimeout(timer);
          listeners.delete(on);
          resolve(m);
        }
      };
      listeners.add(on);
    });

  await send('Browser.getVersion');
  return {
    async newPage(viewport, headers = {}) {
      const { targetId } = (await send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
      const { sessionId } = (await send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
      const s = (method: string, params: Record<string, unknown> = {}) => send(method, params, sessionId);
      await s('Page.enable');
      await s('Network.enable');
      if (Object.keys(headers).length > 0) await s('Network.setExtraHTTPHeaders', { headers });
      listeners.add((m) => {
        if (m.sessionId !== sessionId) return;
        const requestId = (m.params as { requestId?: string } | undefined)?.requestId;
        if (m.method === 'Fetch.requestPaused') void s('Fetch.continueRequest', { requestId }).catch(() => undefined);
        if (m.method === 'Fetch.authRequired')
          void s('Fetch.continueWithAuth', { requestId, authChallengeResponse: { response: 'CancelAuth' } }).catch(
            () => undefined,
          );
      });
      await s('Fetch.enable', { handleAuthRequests: true });
      await s('Emulation.setDeviceMetricsOverride', {
        width: viewport.width,
        height: viewport.height,
        deviceScaleFactor: viewport.deviceScaleFactor ?? 1,
        mobile: viewport.mobile ?? false,
      });
      return {
        async goto(url) {
          let status = 0;
          const onResponse = (m: Message) => {
            const p = m.params as { type?: string; response?: { url?: string; status?: number } } | undefined;
            if (m.sessionId === sessionId && m.method === 'Network.responseReceived' && p?.type === 'Document')
              status = p.response?.status ?? 0;
          };
          listeners.add(onResponse);
          const loaded = event(sessionId, 'Page.loadEventFired', 30_000);
          const nav = (await s('Page.navigate', { url })) as { errorText?: string };
          if (nav.errorText) throw new Error(`navigating to ${url}: ${nav.errorText}`);
          await loaded;
          listeners.delete(onResponse);
          return status;
        },
        async evaluate<T>(expression: string) {
          const r = (await s('Runtime.evaluate', { expression, returnByValue: true })) as {
            result: { value: T };
            exceptionDetails?: { text: string };
          };
          if (r.exceptionDetails) throw new Error(`evaluate ${expression}: ${r.exceptionDetails.text}`);
          return r.result.value;
        },
        async screenshot(file, maxHeight = 2_400) {
          const metrics = (await s('Page.getLayoutMetrics')) as { cssContentSize: { width: number; height: number } };
          const height = Math.min(Math.ceil(metrics.cssContentSize.height), maxHeight);
          const { data } = (await s('Page.captureScreenshot', {
            format: 'png',
            captureBeyondViewport: true,
            clip: { x: 0, y: 0, width: viewport.width, height, scale: 1 },
          })) as { data: string };
          writeFileSync(file, Buffer.from(data, 'base64'));
        },
      };
    },
    async close() {
      await send('Browser.close').catch(() => undefined);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
