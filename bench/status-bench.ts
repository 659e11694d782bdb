/**
 * `vault-rollout status` over a large fleet: 100 clusters x 50 workloads, simulated on the three test clusters — each
 * of the 100 routing-table clusters is one of the three API servers (its own credentials, connection pool and LISTs)
 * with its own namespace of 50 Deployments (zero replicas: no pods needed to read a record and a rollout state).
 * Figure: the time of one `status` (every LIST, 50 paths x 100 consumers evaluated, JSON output), in process.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { statusCommand } from '../lib/cli/status-command.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters } from '../test/clusters/kube-http.ts';
import { memoryIo } from '../test/helpers.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';

const CLUSTERS = size(100, 3);
const WORKLOADS = size(50, 2);
const RUNS = size(3, 1);
const ns = (i: number) => `bench-status-${String(i).padStart(3, '0')}`;
const app = (j: number) => `app-${String(j).padStart(2, '0')}`;

export async function statusBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  try {
    const { clusters } = loadClusters();
    const real = clusters.slice(0, 3);
    // The fleet: namespace i lives on real cluster i % 3 and already records version 1 of each app's path.
    for (let i = 0; i < CLUSTERS; i++) {
      const c = real[i % real.length];
      if (!c) throw new Error('no test cluster');
      const admin = clusterClient(c, 'admin');
      const exists = await admin.request('GET', `/api/v1/namespaces/${ns(i)}`);
      if (exists.status === 200) continue;
      await admin.request('POST', '/api/v1/namespaces', {
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns(i) } },
      });
      await Promise.all(
        Array.from({ length: WORKLOADS }, (_, j) =>
          admin.request('POST', `/apis/apps/v1/namespaces/${ns(i)}/deployments`, {
            body: {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              metadata: { name: app(j), namespace: ns(i) },
              spec: {
                replicas: 0,
                revisionHistoryLimit: 1,
                selector: { matchLabels: { app: app(j) } },
                template: {
                  metadata: {
                    labels: { app: app(j) },
                    annotations: {
                      'vault-rollout.io/versions': JSON.stringify({ [`secret/bench/status/${app(j)}`]: 1 }),
                    },
                  },
                  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
                },
              },
            },
          }),
        ),
      );
    }
    const dir = mkdtempSync(join(tmpdir(), 'vr-status-bench-'));
    const routes = `clusters:
${Array.from({ length: CLUSTERS }, (_, i) => `  c${String(i).padStart(3, '0')}: { kubeconfig: { file: ${JSON.stringify(real[i % real.length]?.vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2 } }
routes:
${Array.from(
  { length: CLUSTERS },
  (_, i) => `  - name: c${String(i).padStart(3, '0')}
    match: { path: "secret/bench/status/{app}" }
    targets: [{ clusters: [c${String(i).padStart(3, '0')}], namespace: ${ns(i)}, names: ["*"], kind: Deployment, name: "{app}" }]`,
).join('\n')}
`;
    writeFileSync(join(dir, 'routes.yaml'), routes);
    const times: number[] = [];
    let lists = 0;
    let objects = 0;
    let consumers = 0;
    let code = -1;
    // Deployments created by this run are judged rolling until their controller has observed them: time only a
    // fleet at rest. A fresh cluster's controller-manager writes at its default 20 requests/s, so 5,000 new
    // Deployments take minutes: wait while the count still falls, and give up after a minute without progress.
    let settledBy = Date.now() + 60_000;
    let notOk = Number.POSITIVE_INFINITY;
    for (;;) {
      const io = memoryIo({ [join(dir, 'routes.yaml')]: routes });
      if ((await statusCommand(['--routes', join(dir, 'routes.yaml'), '--json'], io)) === 0) break;
      const left = consumersNotOk(io.out);
      if (left < notOk) [notOk, settledBy] = [left, Date.now() + 60_000];
      if (Date.now() > settledBy)
        throw new Error(`the status fleet never settled; the last status said: ${notSettled(io.out)}`);
      await new Promise((r) => setTimeout(r, 5_000));
    }
    for (let run = 0; run < RUNS; run++) {
      const io = memoryIo({ [join(dir, 'routes.yaml')]: routes });
      const stats = { lists: 0, objects: 0 };
      const t0 = performance.now();
      code = await statusCommand(['--routes', join(dir, 'routes.yaml'), '--json'], io, { stats });
      times.push(performance.now() - t0);
      lists = stats.lists;
      objects = stats.objects;
      consumers = (JSON.parse(io.out) as { summary: { consumers: number } }).summary.consumers;
    }
    if (code !== 0 || consumers !== CLUSTERS * WORKLOADS)
      throw new Error(`status answered ${code} with ${consumers} consumers; expected 0 and ${CLUSTERS * WORKLOADS}`);
    const ms = median(times);
    return [
      {
        name: 'status_fleet_100x50_seconds',
        value: round(ms / 1000, 2),
        unit: 's',
        goal: '<= 10',
        met: ms <= 10_000,
        spread: [round(Math.min(...times) / 1000, 2), round(Math.max(...times) / 1000, 2)],
        runs: RUNS,
        note: `${CLUSTERS} clusters x ${WORKLOADS} Deployments (simulated on 3 API servers, a namespace each); ${lists} LISTs, ${objects} objects, ${consumers} consumers of 50 paths; one process, cold connections each run`,
      },
    ];
  } finally {
    if (started.started) await down({ log: () => {} });
  }
}

/** How many consumers a `status --json` output counts as not ok (all of them when it is no such output). */
function consumersNotOk(json: string): number {
  try {
    const s = JSON.parse(json) as { paths: { consumers: { ok: boolean }[] }[] };
    return s.paths.reduce((n, p) => n + p.consumers.filter((c) => !c.ok).length, 0);
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** What kept a status from ok, in short: its unreadable clusters, its notes and its first consumers not ok. */
function notSettled(json: string): string {
  try {
    const s = JSON.parse(json) as {
      unreadable: unknown[];
      notes: string[];
      paths: { path: string; notes: string[]; consumers: { ok: boolean; name: string; cluster: string }[] }[];
    };
    const bad = s.paths.flatMap((p) => p.consumers.filter((c) => !c.ok).map((c) => ({ path: p.path, ...c })));
    return JSON.stringify({
      unreadable: s.unreadable.slice(0, 3),
      notes: [...s.notes, ...s.paths.flatMap((p) => p.notes)].slice(0, 3),
      consumersNotOk: bad.length,
      first: bad.slice(0, 2),
    }).slice(0, 3000);
  } catch {
    return json.slice(0, 400);
  }
}
