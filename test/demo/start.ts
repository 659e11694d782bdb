/**
 * `npm start`: the whole loop on this machine, in the foreground. It brings up (or reuses) the three local clusters,
 * creates the example workloads of infra/routes/example.yaml in them, starts an OpenBao dev server with a `file`
 * audit device, `vault-rollout relay` following that file and `vault-rollout serve` on the example routing table, then
 * shows every change serve accepts, every restart and every rollout's end, per cluster and workload, until SIGINT or
 * SIGTERM (Ctrl-C stops it in about 2 s). It stops what it
 * started and nothing else: clusters that were already running stay up.
 *
 * Why here and not in lib/cli: the demo is built from the test harness (Kubernetes built from its Go modules, OpenBao
 * fetched into ~/.cache, test/clusters and test/vault). lib/ is what ships and must not depend on test/; the
 * `vault-rollout` CLI keeps only commands a user runs against real Vault and clusters. relay and serve run as the real
 * CLI in child processes, exactly as a user would run them.
 *
 *   node test/demo/start.ts          (bin/start runs it when no routing table of your own is given)
 * Environment: PORT (serve's port, default any free one), VAULT_ROLLOUT_CLUSTERS_PORT_BASE (the clusters' ports),
 * VAULT_ROLLOUT_WEBHOOK_SECRET (shared by relay and serve; bin/start keeps one in .local/webhook-secret).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { homedir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { down, KUBERNETES_VERSION, up } from '../clusters/clusters.ts';
import { credentialsFor, kubeRequest, waitFor, type ClusterInfo } from '../clusters/kube-http.ts';
import { ensureServerBinary, startDevServer, type DevServer } from '../vault/server.ts';
import { LiveView } from './live-lines.ts';
import { prepareTlsReader, TLS_READER, tlsReaderObjects, watchTlsReader } from './tls-reader.ts';
import { exampleWorkloads, TLS_LABEL, toYamlStream, workloadsOf } from './workloads.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ROUTES = 'infra/routes/example.yaml';
const STATE_DIR = join(REPO_ROOT, '.local', 'start');
const LOG_DIR = join(STATE_DIR, 'logs');
const AUDIT_FILE = join(STATE_DIR, 'audit.log');
const TOKEN_FILE = join(STATE_DIR, 'bao-token');
const SPOOL_DIR = join(STATE_DIR, 'spool');
const PID_FILE = join(STATE_DIR, 'pid');
const KUBECTL = join(REPO_ROOT, '.local', 'bin', 'kubectl');
const BAO = join(REPO_ROOT, '.local', 'bin', 'bao');
/** Namespaces of the example workloads whose ReplicaSets are shown. */
const WATCHED_NAMESPACES = new Set(['payments', 'edge']);
const MAX_WATCH_LINE = 1024 * 1024;

const rel = (path: string): string => relative(REPO_ROOT, path) || '.';
const clock = (): string => new Date().toISOString().slice(11, 19);
const say = (text: string): void => void process.stdout.write(`${text}\n`);
const live = (text: string): void => say(`${clock()}  ${text}`);
/** What was shown of changes, restarts and rollouts: each restart and each rollout's end once. */
const view = new LiveView();
const seconds = (t0: number): string => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

/**
 * How long a child may take to stop after SIGTERM before it is killed: Ctrl-C stops the demo within about 2 s. What
 * serve still has queued is not worth waiting for here: its queue file is removed at the next start.
 */
const STOP_GRACE_MS = 1_500;

/** What was started, stopped all at once. */
const cleanups: Array<{ what: string; stop: () => Promise<void> }> = [];
let stopping = false;
const stopRequested = new Promise<void>((resolve) => {
  const onSignal = (): void => {
    if (stopping) return;
    stopping = true;
    resolve();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
});

class StopRequested extends Error {}
const checkStop = (): void => {
  if (stopping) throw new StopRequested('stopped during start-up');
};

// ------------------------------------------------------------------ children ---

interface Child {
  process: ChildProcess;
  exited: Promise<void>;
}

/**
 * The real CLI (`node lib/cli/main.ts <command>`) in its own process group, so a terminal's Ctrl-C reaches only this
 * program, which then stops the child with SIGTERM and waits (the commands finish their work on SIGTERM).
 */
function startCli(
  name: string,
  args: string[],
  env: Record<string, string>,
  onStdoutLine?: (line: string) => void,
  onStderrLine?: (line: string) => void,
): Child {
  const logFile = join(LOG_DIR, `${name}.log`);
  const child = spawn(process.execPath, [join(REPO_ROOT, 'lib', 'cli', 'main.ts'), ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? STATE_DIR, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const watchdog = child.pid === undefined ? undefined : startWatchdog(child.pid);
  const lines = (each?: (line: string) => void) => {
    let buffer = '';
    return (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      appendFileSync(logFile, text);
      buffer += text;
      if (buffer.length > MAX_WATCH_LINE) buffer = buffer.slice(-MAX_WATCH_LINE);
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        each?.(line);
      }
    };
  };
  child.stdout.on('data', lines(onStdoutLine));
  child.stderr.on('data', lines(onStderrLine));
  child.once('exit', (code, signal) => {
    if (!stopping) live(`error     ${name} exited (${code ?? signal}); see ${rel(logFile)}`);
  });
  cleanups.push({
    what: name,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
        process.kill(child.pid, 'SIGTERM');
        const timer = setTimeout(() => child.pid !== undefined && tryKill(-child.pid, 'SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
      if (watchdog?.pid !== undefined) tryKill(watchdog.pid, 'SIGKILL');
    },
  });
  return { process: child, exited };
}

/**
 * Stops a child's process group with SIGTERM if this program dies without stopping it (SIGKILL, a crash): a shell
 * reads a pipe from us and signals the group when the pipe closes — as test/vault/server.ts does for OpenBao.
 */
function startWatchdog(pid: number): ChildProcess {
  const watchdog = spawn(
    'bash',
    ['-c', 'while read -r _; do :; done; kill -TERM -- "-$1" 2>/dev/null', 'watchdog', String(pid)],
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return watchdog;
}

function tryKill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* gone */
  }
}

function run(cmd: string, args: string[], input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: REPO_ROOT, stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString('utf8')).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${rel(cmd)} ${args[1] ?? ''} failed (${code}): ${err.trim()}`)),
    );
    child.stdin.end(input);
  });
}

// ------------------------------------------------------------------ steps ---

async function applyWorkloads(clusters: ClusterInfo[]): Promise<void> {
  await Promise.all(
    clusters.map(async (c) => {
      const { first, then } = exampleWorkloads(c.name);
      // --force-conflicts: the demo owns its example objects, even where something else created one first (the
      // integration tests create the same Harbor CRD their own way).
      const apply = (objects: object[]) =>
        run(
          KUBECTL,
          [
            `--kubeconfig=${c.adminKubeconfig}`,
            'apply',
            '--server-side',
            '--force-conflicts',
            '--field-manager=vault-rollout-demo',
            '--filename=-',
          ],
          toYamlStream(objects),
        );
      // Each run's OpenBao is new, so its versions start at 1 again, and vault-rollout restarts once per version: a
      // workload left by an earlier run already records version 1 and would (rightly) stay unchanged. Start afresh.
      const remove = (objects: object[]) =>
        run(
          KUBECTL,
          [
            `--kubeconfig=${c.adminKubeconfig}`,
            'delete',
            '--ignore-not-found',
            '--wait=true',
            '--timeout=60s',
            '--filename=-',
          ],
          toYamlStream(objects),
        );
      if (workloadsOf(first).length > 0) await remove(workloadsOf(first));
      if (then.length > 0) await remove(then).catch(() => undefined); // the first run has no Harbor CRD yet
      if (first.length > 0) await apply(first);
      if (then.length > 0) {
        const creds = credentialsFor(c, 'admin');
        await waitFor(
          async () => {
            const r = await kubeRequest<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
              c.server,
              creds,
              'GET',
              '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/harbors.example.com',
            );
            return (r.body?.status?.conditions ?? []).some((x) => x.type === 'Established' && x.status === 'True');
          },
          { timeoutMs: 60_000, what: `${c.name}: CRD harbors.example.com Established` },
        );
        await apply(then);
      }
    }),
  );
}

/** The mounts of the example routing table beyond dev mode's `secret/` (KV v2): `legacy/` (KV v1), namespace team-a. */
async function mountExampleEngines(bao: DevServer): Promise<string[]> {
  const notes: string[] = [];
  await bao.client.enableKv('legacy', 1, 'example routing table: batch-opt-in');
  // OpenBao namespaces (2.3+): team-a with its own secret/ (KV v2), for the payments-db route.
  try {
    await bao.client.post('sys/namespaces/team-a', {});
    const token = readFileSync(TOKEN_FILE, 'utf8');
    const mounted = await fetch(`${bao.addr}/v1/sys/mounts/secret`, {
      method: 'POST',
      headers: { 'X-Vault-Token': token, 'X-Vault-Namespace': 'team-a', 'Content-Type': 'application/json' },
      body: JSON.stringify({ type: 'kv', options: { version: '2' } }),
      signal: AbortSignal.timeout(10_000),
    });
    await mounted.body?.cancel();
    if (!mounted.ok) throw new Error(`mounting team-a/secret: HTTP ${mounted.status}`);
  } catch (e) {
    notes.push(
      `namespace team-a not created (${e instanceof Error ? e.message : String(e)}): the payments-db route cannot be tried`,
    );
  }
  return notes;
}

/**
 * Watches each cluster's ReplicaSets in the example namespaces and shows the new ones: a Deployment rolled out.
 * Resolves once the ones that exist now are known (they are not shown).
 */
function watchReplicaSets(cluster: ClusterInfo): Promise<void> {
  let listed: (() => void) | undefined;
  const known = new Promise<void>((resolve) => (listed = resolve));
  const creds = credentialsFor(cluster, 'admin');
  const seen = new Set<string>();
  let request: ReturnType<typeof httpsRequest> | undefined;
  let backoffMs = 500;
  interface ReplicaSet {
    metadata: { uid: string; name: string; namespace: string; ownerReferences?: Array<{ kind: string; name: string }> };
  }
  const consider = (rs: ReplicaSet, show: boolean): void => {
    if (seen.has(rs.metadata.uid) || !WATCHED_NAMESPACES.has(rs.metadata.namespace)) return;
    seen.add(rs.metadata.uid);
    const owner = rs.metadata.ownerReferences?.find((o) => o.kind === 'Deployment');
    if (!show || !owner) return;
    view.replicaSet(cluster.name, rs.metadata.namespace, owner.name, rs.metadata.name, Date.now()).forEach(live);
  };
  let first = true;
  const connect = async (): Promise<void> => {
    if (stopping) return;
    try {
      const list = await kubeRequest<{ metadata: { resourceVersion: string }; items: ReplicaSet[] }>(
        cluster.server,
        creds,
        'GET',
        '/apis/apps/v1/replicasets?limit=500',
      );
      if (list.status !== 200) throw new Error(`HTTP ${list.status}`);
      for (const rs of list.body.items) consider(rs, !first);
      first = false;
      listed?.();
      backoffMs = 500;
      let buffer = '';
      request = httpsRequest(
        new URL(
          `/apis/apps/v1/replicasets?watch=1&resourceVersion=${list.body.metadata.resourceVersion}`,
          cluster.server,
        ),
        { ca: creds.ca, cert: creds.cert, key: creds.key, agent: false, rejectUnauthorized: true },
        (res) => {
          res.on('data', (chunk: Buffer) => {
            buffer += chunk.toString('utf8');
            if (buffer.length > MAX_WATCH_LINE) buffer = '';
            for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
              const line = buffer.slice(0, nl);
              buffer = buffer.slice(nl + 1);
              try {
                const event = JSON.parse(line) as { type: string; object: ReplicaSet };
                if (event.type === 'ADDED') consider(event.object, true);
              } catch {
                /* a partial or foreign line: the next list catches up */
              }
            }
          });
          res.on('end', () => void setTimeout(() => void connect(), 100));
          res.on('error', () => undefined);
        },
      );
      request.on('error', () => void setTimeout(() => void connect(), backoffMs));
      request.end();
    } catch {
      backoffMs = Math.min(backoffMs * 2, 10_000);
      setTimeout(() => void connect(), backoffMs);
    }
  };
  void connect();
  cleanups.push({ what: `${cluster.name} watch`, stop: async () => void request?.destroy() });
  return known;
}

// ------------------------------------------------------------------ main ---

/** The pid of another `npm start` of this checkout that is still running, if any. */
function runningStart(): number | undefined {
  try {
    const pid = Number(readFileSync(PID_FILE, 'utf8').trim());
    if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return undefined;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('test/demo/start.ts') ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function startAll(): Promise<void> {
  const t0 = Date.now();
  say('vault-rollout: the whole loop on this machine: three local Kubernetes clusters, an OpenBao dev server,');
  say(`the relay following its audit log, and serve on ${ROUTES}. Ctrl-C stops what this starts.`);
  const cacheRoot = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'vault-rollout');
  if (!existsSync(join(cacheRoot, `kubernetes-${KUBERNETES_VERSION}-sched`, '.complete'))) {
    say(
      `First run: building Kubernetes ${KUBERNETES_VERSION} and etcd from their Go modules (about 5-8 minutes on 2 cores, 2 GB of`,
    );
    say(
      'memory, 4 GB of Go caches; needs Go and openssl) and fetching OpenBao 2.7.2 (seconds). Later runs start in seconds.',
    );
  }
  const other = runningStart();
  if (other !== undefined)
    throw new Error(`npm start already runs here (pid ${other}); stop it first (Ctrl-C in its terminal)`);
  rmSync(STATE_DIR, { recursive: true, force: true });
  mkdirSync(LOG_DIR, { recursive: true, mode: 0o700 });
  writeFileSync(PID_FILE, `${process.pid}\n`);

  // 1. Clusters (stopped on exit only if started here).
  const clusters = await up({ log: (m) => say(`[clusters] ${m}`) });
  if (clusters.started) cleanups.push({ what: 'clusters', stop: () => down({ log: () => undefined }) });
  checkStop();
  const t1 = Date.now();
  await applyWorkloads(clusters.clusters.clusters);
  say(
    `[workloads] example workloads (re)created in ${clusters.clusters.clusters.map((c) => c.name).join(', ')} in ${seconds(t1)}`,
  );
  checkStop();

  // 2. OpenBao with a file audit device.
  const t2 = Date.now();
  await ensureServerBinary('openbao');
  const bao = await startDevServer({ kind: 'openbao', auditFile: AUDIT_FILE, build: false });
  cleanups.push({ what: 'OpenBao', stop: () => bao.stop() });
  writeFileSync(TOKEN_FILE, bao.token, { mode: 0o600 });
  const notes = await mountExampleEngines(bao);
  say(`[openbao] OpenBao ${bao.version} at ${bao.addr} in ${seconds(t2)}; audit log ${rel(AUDIT_FILE)}`);
  for (const note of notes) say(`[openbao] ${note}`);
  checkStop();

  // 2b. The consumer that really runs, on alpha's real node, reading OpenBao at start-up.
  const reader = await prepareTlsReader(clusters.clusters, bao);
  if (reader !== undefined) {
    cleanups.push({ what: 'tls-reader forwarder', stop: reader.stop });
    const alpha = clusters.clusters.clusters.find((c) => c.name === 'alpha')!;
    const kubectl = (args: string[], input: string) =>
      run(KUBECTL, [`--kubeconfig=${alpha.adminKubeconfig}`, ...args], input);
    const objects = tlsReaderObjects(reader.image, reader.baoAddr, reader.token, TLS_LABEL);
    // A new OpenBao each run: the earlier run's reader recorded versions of another Vault, and its token is dead.
    await kubectl(
      ['delete', '--ignore-not-found', '--wait=true', '--timeout=60s', '--filename=-'],
      toYamlStream(objects),
    );
    await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--field-manager=vault-rollout-demo', '--filename=-'],
      toYamlStream(objects),
    );
    const stopWatch = watchTlsReader(clusters.clusters, (word, text) => live(`${word.padEnd(10)}alpha  ${text}`));
    cleanups.push({ what: 'tls-reader watch', stop: async () => stopWatch() });
    say(
      `[consumer] ${TLS_READER.namespace}/${TLS_READER.name} in alpha: a real container on the real node, reading secret/shared/tls from OpenBao at start-up`,
    );
  }
  checkStop();

  // 3. serve, then the relay pointed at it.
  const secret = process.env.VAULT_ROLLOUT_WEBHOOK_SECRET || randomBytes(32).toString('hex');
  const common = { VAULT_ROLLOUT_WEBHOOK_SECRET: secret, POWERTOOLS_METRICS_DISABLED: 'true' };
  let listening: ((url: string) => void) | undefined;
  const serveUrl = new Promise<string>((resolve) => (listening = resolve));
  // A fresh OpenBao starts at version 1 again: what an earlier demo's serve left queued belongs to another Vault.
  const queueFile = join(STATE_DIR, 'serve-queue.sqlite');
  for (const f of [queueFile, `${queueFile}-wal`, `${queueFile}-shm`]) rmSync(f, { force: true });
  const serve = startCli(
    'serve',
    [
      'serve',
      '--routes',
      ROUTES,
      '--allow-example-routes',
      '--port',
      process.env.PORT ?? '0',
      '--queue-file',
      queueFile,
    ],
    common,
    (line) => view.serveLine(line, Date.now()).forEach(live),
    (line) => {
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(line)?.[1];
      if (url) listening?.(url);
    },
  );
  const url = await Promise.race([
    serveUrl,
    serve.exited.then(() => Promise.reject(new Error(`serve exited; see ${rel(join(LOG_DIR, 'serve.log'))}`))),
  ]);
  let relayStarted: (() => void) | undefined;
  const relayUp = new Promise<void>((resolve) => (relayStarted = resolve));
  const relayArgs = [
    '--audit-file',
    AUDIT_FILE,
    '--from-start',
    '--to',
    url,
    '--spool',
    SPOOL_DIR,
    '--batch-wait',
    '200ms',
    '--grace',
    '1s',
  ];
  const relay = startCli('relay', ['relay', ...relayArgs], common, undefined, (line) => {
    try {
      const entry = JSON.parse(line) as { level?: string; message?: string };
      if (entry.message === 'relay started') relayStarted?.();
      if (entry.level === 'warn' || entry.level === 'error')
        live(`${entry.level === 'warn' ? 'warning   ' : 'error     '}relay: ${entry.message ?? ''}`);
    } catch {
      /* not a log line */
    }
  });
  // Ready means ready: the relay follows the audit log (on a busy machine Node takes seconds to load it).
  await Promise.race([
    relayUp,
    relay.exited.then(() => Promise.reject(new Error(`the relay exited; see ${rel(join(LOG_DIR, 'relay.log'))}`))),
  ]);
  await Promise.race([
    Promise.all(clusters.clusters.clusters.map(watchReplicaSets)),
    new Promise((r) => setTimeout(r, 30_000)),
  ]);
  checkStop();

  say('');
  say(
    `ready in ${seconds(t0)}: clusters ${clusters.clusters.clusters.map((c) => c.name).join(', ')}${clusters.started ? '' : ' (already running, left running)'}, OpenBao, relay, serve`,
  );
  say(`  OpenBao  ${bao.addr}  (dev server, in memory; its root token is in ${rel(TOKEN_FILE)}, mode 0600)`);
  say(`  serve    ${url}  (routes ${ROUTES}; logs in ${rel(LOG_DIR)}/)`);
  say('Try this in another terminal, from this directory:');
  say('');
  say(
    `  BAO_ADDR=${bao.addr} BAO_TOKEN=$(cat ${rel(TOKEN_FILE)}) ${rel(BAO)} kv put -mount=secret shared/tls tls.crt=rotated`,
  );
  say('');
  say(
    'Route shared-tls restarts the Deployments labelled vault-rollout.io/tls=shared in namespace edge of alpha, beta',
  );
  say('and gamma, and the DaemonSet edge/ingress-proxy in alpha. Other routed paths: -mount=legacy batch/nightly');
  say(
    '(CronJobs that opt in, eu clusters), -mount=secret registry/main (a custom resource in alpha)' +
      (notes.length === 0 ? ', and' : '.'),
  );
  if (notes.length === 0)
    say('-namespace=team-a -mount=secret payments/checkout/db (Deployment payments/checkout in the prod clusters).');
  if (reader !== undefined)
    say(
      "One of them, edge/tls-reader in alpha, runs on the real node: each new pod's `read` line is the version it read.",
    );
  say("Watching; each change, each restart and each rollout's end show below:");
}

async function stopAll(): Promise<void> {
  const t0 = Date.now();
  say('');
  say(
    `stopping: ${
      cleanups
        .map((c) => c.what)
        .reverse()
        .join(', ') || 'nothing started'
    }`,
  );
  const took: string[] = [];
  const stop = async (c: (typeof cleanups)[number]): Promise<void> => {
    const t = Date.now();
    try {
      await c.stop();
    } catch (e) {
      say(`could not stop ${c.what}: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (Date.now() - t >= 100) took.push(`${c.what} ${seconds(t)}`);
  };
  // All side by side, the clusters too: each waits on its own processes, and nothing here needs another to finish
  // first (serve's last requests to a cluster going down fail into its log, which the next start replaces).
  await Promise.all(cleanups.map(stop));
  say(`stopped in ${seconds(t0)}${took.length > 0 ? ` (${took.join(', ')})` : ''}`);
}

async function main(): Promise<number> {
  let code = 0;
  try {
    await startAll();
    await stopRequested;
  } catch (e) {
    if (!(e instanceof StopRequested) && !stopping) {
      say(`start failed: ${e instanceof Error ? e.message : String(e)}`);
      code = 1;
    }
  }
  await stopAll();
  return code;
}

if (import.meta.main) {
  const code = await main();
  if (runningStart() === undefined) {
    rmSync(TOKEN_FILE, { force: true }); // the dev server, and with it the token, is gone
    rmSync(PID_FILE, { force: true });
  }
  // Everything started is stopped: exit now rather than wait for sockets of stopped clusters to time out.
  process.exit(code);
}
