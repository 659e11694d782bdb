/**
 * The status page for 100 clusters x 50 workloads: 50 paths x 100 consumers, three waves (the last one
 * still behind: a rotation in progress), a few failed rollouts and halts — the status `vault-rollout status` computes
 * from such a fleet (fleetStatus over synthetic listings: the LISTs themselves are `status`'s own figure,
 * status_fleet_100x50_seconds, and `serve` reuses one read for 5 s). Figures:
 * - render: the page from that status (pathRotations + renderStatusPage, what `status --output html` and every GET
 *   /status do), beside the `status --json` text of the same status (statusJson + printableJson) in the same run;
 * - serve: GET /status through serve's app on @hono/node-server over loopback with the bearer token (authentication,
 *   render, the bytes read by the client), beside the same route answering the JSON text instead.
 * Goal: the page loads in under 200 ms.
 */
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { statusPage, type StatusSnapshot } from '../lib/cli/status-command.ts';
import { buildApp } from '../lib/http/app.ts';
import { memoryTelemetry } from '../lib/kernel/telemetry.ts';
import { printableJson } from '../lib/report/printable.ts';
import { statusJson } from '../lib/report/status-report.ts';
import type { RotationHalt } from '../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { fleetStatus, listKey, type ClusterListing, type VaultAnswer } from '../lib/status/fleet-status.ts';
import type { KubeObject } from '../lib/workloads/workload-kinds.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';

const CLUSTERS = 100;
const WORKLOADS = 50;
const RUNS = size(30, 2);
const TOKEN = 'bench-status-page-token';
const c = (i: number) => `c${String(i).padStart(3, '0')}`;
const app = (j: number) => `app-${String(j).padStart(2, '0')}`;

/** The fleet: cluster i's namespace holds 50 Deployments, each consuming its app's path; the third wave still records 1. */
function fleet(): { table: ReturnType<typeof loadRoutingTable>; snapshot: StatusSnapshot } {
  const table = loadRoutingTable(`clusters:
${Array.from({ length: CLUSTERS }, (_, i) => `  ${c(i)}: { kubeconfig: { file: k } }`).join('\n')}
vault: { mounts: { secret: 2 } }
rollout:
  waves: [{ clusters: [${Array.from({ length: 10 }, (_, i) => c(i)).join(', ')}] }, { clusters: [${Array.from({ length: 40 }, (_, i) => c(i + 10)).join(', ')}] }]
  gate: { healthy: true, timeout: 10m, pause: 1m }
routes:
  - name: fleet
    match: { path: "secret/bench/status/{app}" }
    targets: [{ clusters: [${Array.from({ length: CLUSTERS }, (_, i) => c(i)).join(', ')}], namespace: apps, names: ["*"], kind: Deployment, name: "{app}" }]
`);
  const listings: ClusterListing[] = Array.from({ length: CLUSTERS }, (_, i) => {
    const deployments: KubeObject[] = Array.from({ length: WORKLOADS }, (_, j) => {
      const version = i < 50 ? 2 : 1;
      const failed = i === 3 && j % 10 === 0;
      const status = failed
        ? {
            observedGeneration: 2,
            replicas: 3,
            updatedReplicas: 1,
            availableReplicas: 2,
            conditions: [
              {
                type: 'Progressing',
                status: 'False',
                reason: 'ProgressDeadlineExceeded',
                message: `ReplicaSet "${app(j)}-7d9f" has timed out progressing.`,
              },
            ],
          }
        : { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 };
      return {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { namespace: 'apps', name: app(j), generation: 2 },
        spec: {
          replicas: 2,
          template: {
            metadata: {
              annotations: {
                'vault-rollout.io/versions': JSON.stringify({ [`secret/bench/status/${app(j)}`]: version }),
                'kubectl.kubernetes.io/restartedAt': '2026-11-27T12:00:00Z',
              },
            },
          },
        },
        status,
      };
    });
    return {
      cluster: c(i),
      lists: new Map([[listKey({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'apps' }), deployments]]),
    };
  });
  const vault = new Map<string, VaultAnswer>(
    Array.from({ length: WORKLOADS }, (_, j) => [
      `secret/bench/status/${app(j)}`,
      { currentVersion: 2, createdTime: '2026-11-27T11:59:00Z' },
    ]),
  );
  const status = fleetStatus(table, listings, vault, { now: Date.parse('2026-11-27T12:05:00Z') });
  const halts: RotationHalt[] = Array.from({ length: 5 }, (_, k) => ({
    rotation: `${k}`.repeat(16),
    route: 'fleet',
    changes: [`secret/bench/status/${app(k)}|2|write`],
    secrets: [`secret/bench/status/${app(k)} version 2`],
    wave: 2,
    waves: 3,
    failing: { cluster: c(12), namespace: 'apps', kind: 'Deployment', name: app(k), state: 'failed' },
    why: 'rollout failed: ProgressDeadlineExceeded',
    notRestarted: Array.from({ length: 50 }, (_, i) => c(i + 50)),
    haltedAt: '2026-11-27T12:03:00Z',
  }));
  return { table, snapshot: { ...status, halts, ok: false } };
}

function timed(runs: number, f: () => unknown): number[] {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    f();
    times.push(performance.now() - t0);
  }
  return times;
}

async function timedAsync(runs: number, f: () => Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await f();
    times.push(performance.now() - t0);
  }
  return times;
}

/** GET /status on serve's app, answering `body()`; the median over RUNS, after a warm-up. */
async function served(
  table: ReturnType<typeof loadRoutingTable>,
  body: () => string,
): Promise<{ times: number[]; bytes: number }> {
  const appServer = buildApp({
    table,
    queue: { send: async () => undefined },
    telemetry: memoryTelemetry(),
    secrets: async () => ({ bearerToken: TOKEN }),
    statusPage: async () => body(),
    // The page has its own read-only credential, apart from the intake's bearer token.
    statusAccess: { token: TOKEN },
  });
  const server = serve({ fetch: appServer.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/status`;
  let bytes = 0;
  const get = async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (res.status !== 200) throw new Error(`GET /status answered ${res.status}`);
    bytes = (await res.arrayBuffer()).byteLength;
  };
  try {
    await timedAsync(3, get);
    return { times: await timedAsync(RUNS, get), bytes };
  } finally {
    await new Promise((r) => server.close(r));
  }
}

const ms = (times: readonly number[]) => round(median(times), 1);
const spread = (times: readonly number[]): [number, number] => [
  round(Math.min(...times), 1),
  round(Math.max(...times), 1),
];

export async function statusPageBench(): Promise<Figure[]> {
  const { table, snapshot } = fleet();
  const consumers = snapshot.paths.reduce((n, p) => n + p.consumers.length, 0);
  if (snapshot.paths.length !== WORKLOADS || consumers !== CLUSTERS * WORKLOADS)
    throw new Error(
      `the fleet has ${snapshot.paths.length} paths and ${consumers} consumers; expected ${WORKLOADS} and ${CLUSTERS * WORKLOADS}`,
    );
  const page = () => statusPage(table, snapshot, { store: { name: 'SQLite file bench' }, generatedAt: Date.now() });
  const json = () => `${printableJson({ ...statusJson(snapshot), halts: snapshot.halts }, 2)}\n`;
  const html = page();
  if (!html.includes('Rotations in progress') || !html.includes('Halted rotations (5)'))
    throw new Error('the page does not show the rotation and the halts');
  timed(3, page);
  timed(3, json);
  const render = timed(RUNS, page);
  const renderJson = timed(RUNS, json);
  const get = await served(table, page);
  const getJson = await served(table, json);
  const note = `${CLUSTERS} clusters x ${WORKLOADS} workloads: ${WORKLOADS} paths x ${CLUSTERS} consumers, 3 waves (the last behind), 5 failed rollouts, 5 halts; page ${Math.round(Buffer.byteLength(html) / 1024)} KiB, ${Math.round(gzipSync(html).byteLength / 1024)} KiB gzipped (bounded: ${(html.match(/<tr><td data-label="Cluster">/g) ?? []).length} consumer rows shown), JSON ${Math.round(Buffer.byteLength(json()) / 1024)} KiB`;
  return [
    {
      name: 'status_page_render_100x50_ms',
      value: ms(render),
      unit: 'ms',
      goal: '< 200',
      met: median(render) < 200,
      baseline: { name: 'status --json text of the same status, ms', value: ms(renderJson) },
      spread: spread(render),
      runs: RUNS,
      note,
    },
    {
      name: 'status_page_get_100x50_ms',
      value: ms(get.times),
      unit: 'ms',
      goal: '< 200',
      met: median(get.times) < 200,
      baseline: { name: 'the same GET answering the JSON text, ms', value: ms(getJson.times) },
      spread: spread(get.times),
      runs: RUNS,
      note: `GET /status on serve's app (@hono/node-server, loopback, bearer token), rendered per request from one read of the fleet and gzipped (fetch asks for it); ${Math.round(get.bytes / 1024)} KiB vs ${Math.round(getJson.bytes / 1024)} KiB of JSON once decompressed`,
    },
  ];
}
