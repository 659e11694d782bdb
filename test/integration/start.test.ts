/**
 * `npm start` as a newcomer runs it: bin/start as a child process on the test clusters (already up from the global
 * setup, so it must reuse them and leave them running). It prints "ready" and one `bao kv put` command; running that
 * command restarts the example workloads, shown live per cluster and workload, and the clusters' controllers roll
 * out new ReplicaSets. SIGINT stops every process it started, and nothing else.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isHealthy } from '../clusters/clusters.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { admin, repoRootDir } from './support.ts';

const CLUSTERS = ['alpha', 'beta', 'gamma'] as const;
const TOKEN_FILE = join(repoRootDir, '.local', 'start', 'bao-token');

/** Every live descendant of pid (children of children too, whatever their process group). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      /* gone meanwhile */
    }
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift() ?? -1) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
  } catch {
    return false;
  }
};

async function replicaSetsOf(cluster: string, namespace: string, deployment: string): Promise<string[]> {
  const res = await admin(cluster).request('GET', `/apis/apps/v1/namespaces/${namespace}/replicasets`);
  const body = res.body as {
    items: Array<{ metadata: { name: string; ownerReferences?: Array<{ kind: string; name: string }> } }>;
  };
  return body.items
    .filter((rs) => rs.metadata.ownerReferences?.some((o) => o.kind === 'Deployment' && o.name === deployment))
    .map((rs) => rs.metadata.name);
}

describe('npm start', () => {
  let program: ChildProcess | undefined;
  let output = '';
  let exited: Promise<number | null> | undefined;

  afterAll(async () => {
    // Only if a test failed half-way: stop it the way a user would.
    if (program?.pid !== undefined && program.exitCode === null) {
      program.kill('SIGINT');
      await exited;
    }
  });

  it('shows a write in OpenBao restarting the example workloads in every cluster, live, and stops what it started', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0' };
    delete env.VAULT_ROLLOUT_ROUTES;
    delete env.BAO_TOKEN;
    delete env.VAULT_TOKEN;
    program = spawn('sh', ['bin/start'], { cwd: repoRootDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const child = program;
    exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    child.stdout?.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString('utf8')));

    await waitFor(
      async () => {
        if (child.exitCode !== null)
          throw Object.assign(new Error(`start exited ${child.exitCode}:\n${output}`), { fatal: true });
        return /^ready in /m.test(output);
      },
      { timeoutMs: 600_000, intervalMs: 200, what: 'the "ready" line' },
    );
    const command =
      /^ {2}(BAO_ADDR=http:\/\/127\.0\.0\.1:\d+ BAO_TOKEN=\$\(cat \.local\/start\/bao-token\) \.local\/bin\/bao kv put .+)$/m.exec(
        output,
      )?.[1];
    expect(command, output).toBeDefined();
    expect(output).toMatch(/already running, left running/);

    // The token: in a file only its owner reads, never in the output.
    expect(statSync(TOKEN_FILE).mode & 0o777).toBe(0o600);
    const token = readFileSync(TOKEN_FILE, 'utf8');
    expect(token.length).toBeGreaterThan(10);

    // Before any write, the consumer's first pod found nothing to read.
    await waitFor(
      async () =>
        /^\S+ {2}read {6}alpha {2}edge\/tls-reader pod \S+ on real-node-0 read secret\/shared\/tls version none$/m.test(
          output,
        ),
      {
        timeoutMs: 120_000,
        intervalMs: 200,
        what: `the consumer's first read in:\n${output}`,
      },
    );
    const before = Object.fromEntries(
      await Promise.all(CLUSTERS.map(async (c) => [c, await replicaSetsOf(c, 'edge', 'web')] as const)),
    );
    const tried = spawnSync('sh', ['-c', command ?? 'false'], {
      cwd: repoRootDir,
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(tried.status, tried.stderr).toBe(0);

    // Live, per cluster and workload, each once: the restart (with its new ReplicaSet when the cluster made one) and the
    // rollout's end with the time since the change was accepted.
    const expected = [
      /^\S+ {2}change {4}secret\/shared\/tls v\d+ -> 4 targets planned$/m,
      ...CLUSTERS.map(
        (c) => new RegExp(`^\\S+  restarted ${c} +edge/Deployment/web( \\(new ReplicaSet web-\\w+\\))?$`, 'm'),
      ),
      /^\S+ {2}restarted alpha +edge\/DaemonSet\/ingress-proxy$/m,
      // The consumer on the real node: a new pod read the version just written, and the old one is gone.
      /^\S+ {2}restarted alpha +edge\/Deployment\/tls-reader( \(new ReplicaSet tls-reader-\w+\))?$/m,
      /^\S+ {2}read {6}alpha {2}edge\/tls-reader pod tls-reader-\S+ on real-node-0 read secret\/shared\/tls version 1$/m,
      /^\S+ {2}gone {6}alpha {2}edge\/tls-reader pod tls-reader-\S+$/m,
      ...CLUSTERS.map(
        (c) => new RegExp(`^\\S+  complete +${c} +edge/Deployment/web, [\\d.]+ s after the change$`, 'm'),
      ),
    ];
    await waitFor(async () => expected.every((re) => re.test(output)), {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: 'every restart line',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}; missing ${expected.filter((re) => !re.test(output)).join(', ')} in:\n${output}`);
    });

    // Each restart and each completion shown once, whichever of serve and the cluster told of it first.
    for (const c of CLUSTERS) {
      for (const what of ['restarted', 'complete']) {
        expect(
          output.match(new RegExp(`^\\S+  ${what} +${c} +edge/Deployment/web\\b`, 'gm')),
          `${what} ${c}`,
        ).toHaveLength(1);
      }
    }

    for (const c of CLUSTERS) {
      const after = await replicaSetsOf(c, 'edge', 'web');
      expect(
        after.filter((name) => !before[c]?.includes(name)),
        c,
      ).toHaveLength(1);
      const deployment = (await admin(c).request('GET', '/apis/apps/v1/namespaces/edge/deployments/web')).body as {
        spec: { template: { metadata: { annotations?: Record<string, string> } } };
      };
      expect(deployment.spec.template.metadata.annotations?.['vault-rollout.io/versions'], c).toContain(
        'secret/shared/tls',
      );
    }

    const started = descendants(child.pid ?? -1);
    const commands = started.map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' '));
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8')).toContain('test/demo/start.ts'); // bin/start exec'd it
    for (const what of [/main\.ts serve /, /main\.ts relay /, /\/bao server -dev/])
      expect(
        commands.some((c) => what.test(c)),
        `${what} in ${commands.join('\n')}`,
      ).toBe(true);

    child.kill('SIGINT');
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 60_000))]);
    expect(code, output).toBe(0);
    expect(output).toMatch(/^stopped in /m);
    await waitFor(async () => started.every((pid) => !alive(pid)), {
      timeoutMs: 10_000,
      what: 'every process start started to be gone',
    });
    expect(existsSync(TOKEN_FILE)).toBe(false);
    expect(output).not.toContain(token);
    // The clusters were running before: left running.
    expect(await isHealthy()).toBe(true);
  }, 900_000);
});
