/**
 * Prometheus metrics on `serve`, on the real test clusters: a rotation of two secrets through two waves
 * (gamma, then alpha; gate `healthy`, onFailure halt) where one secret's new pods never become Ready in gamma, so its
 * gate halts and the other's gate releases alpha. Then GET /metrics says what happened: changes received, restarts
 * by cluster and outcome, one halt, one release, rollout durations, Kubernetes request latency, the queue — and
 * nothing naming a path, a workload or a token.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { createNamespace, deleteNamespace, getWorkload, spawnServe, uniqueName, type ServeChild } from './support.ts';
import { clustersYaml, deployGoodAndHeld, kvWriteAudit, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-metrics');
const CLUSTERS = ['gamma', 'alpha'] as const;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-metrics-'));
let serve: ServeChild;

beforeAll(async () => {
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(CLUSTERS)}
vault: { mounts: { secret: 2 } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }]
  gate: { healthy: true, timeout: 30s, pause: 1s }
  onFailure: halt
routes:
  - name: metrics
    match: { path: "secret/metrics/{app}" }
    rollout: { timeout: 6s }
    targets: [{ clusters: [gamma, alpha], namespace: ${NS}, names: [good, held], kind: Deployment, name: "{app}" }]
`,
  );
  await Promise.all(CLUSTERS.map((c) => createNamespace(c, NS)));
  // `held`: its version-2 pods never become Ready in gamma (the first wave).
  await deployGoodAndHeld(NS, CLUSTERS, 'gamma', 'secret/metrics/held');
  serve = await spawnServe({
    routesFile,
    queueFile: join(dir, 'queue.sqlite'),
    listenTimeoutMs: 180_000,
    env: serveEnv(dir, join(dir, 'state', 'rotations.sqlite')),
  });
}, 300_000);

afterAll(async () => {
  serve?.child.kill('SIGTERM');
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
});

const auditLine = (app: string, version: number) =>
  kvWriteAudit(`metrics-${app}-${version}`, `secret/metrics/${app}`, version);
const readLine = (app: string) =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `metrics-read-${app}`,
      operation: 'read',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/metrics/${app}`,
    },
    response: { data: {} },
  });

async function scrape(): Promise<{
  text: string;
  value(series: string): number | undefined;
  sum(prefix: string): number;
}> {
  const res = await fetch(`http://127.0.0.1:${serve.port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const lines = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  const value = (series: string) => {
    const line = lines.find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };
  const sum = (prefix: string) =>
    lines.filter((l) => l.startsWith(prefix)).reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  return { text, value, sum };
}

describe('GET /metrics on serve', () => {
  it('counts a rotation with a released wave and a halted one', async () => {
    const post = async (body: string) => {
      const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
        method: 'POST',
        body,
        headers: { authorization: `Bearer ${BEARER_TOKEN}` },
      });
      expect(res.status).toBe(202);
    };
    await post(`${auditLine('good', 2)}\n${readLine('good')}\n`);
    await post(`${auditLine('held', 2)}\n`);
    // The queue holds the work: depth and age are sampled from serve's SQLite file.
    const early = await scrape();
    expect(early.sum('vault_rollout_queue_depth{')).toBeGreaterThanOrEqual(1);

    const m = await waitFor(
      async () => {
        const s = await scrape();
        return s.value('vault_rollout_halted_rotations_total') === 1 &&
          s.value('vault_rollout_gate_decisions_total{decision="released"}') === 1 &&
          (s.value('vault_rollout_targets_total{cluster="alpha",outcome="restarted"}') ?? 0) >= 1
          ? s
          : undefined;
      },
      { timeoutMs: 110_000, intervalMs: 500, what: 'one halt, one released wave and alpha restarted' },
    );
    expect(m.value('vault_rollout_changes_received_total')).toBe(2);
    expect(m.value('vault_rollout_records_ignored_total{reason="read"}')).toBe(1);
    expect(m.value('vault_rollout_targets_total{cluster="gamma",outcome="restarted"}')).toBe(2);
    expect(m.value('vault_rollout_targets_total{cluster="alpha",outcome="restarted"}')).toBe(1);
    expect(m.value('vault_rollout_gate_decisions_total{decision="halted"}')).toBe(1);
    expect(m.value('vault_rollout_gate_decisions_total{decision="released"}')).toBe(1);
    // good's rollout in gamma ended complete, followed by its continuation; held's did not complete.
    expect(
      m.value('vault_rollout_rollout_duration_seconds_count{cluster="gamma",outcome="complete"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(m.value('vault_rollout_vault_to_patch_lag_seconds_count{cluster="gamma"}')).toBe(2);
    expect(
      m.value('vault_rollout_kube_request_duration_seconds_count{cluster="gamma",method="PATCH",outcome="ok"}'),
    ).toBeGreaterThanOrEqual(2);
    expect(
      m.value('vault_rollout_kube_request_duration_seconds_count{cluster="alpha",method="PATCH",outcome="ok"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(m.value('vault_rollout_refused_messages_total')).toBe(0);
    expect(m.value('vault_rollout_dead_letters')).toBe(0);
    expect(m.value('vault_rollout_queue_depth{state="in_flight"}')).toBeGreaterThanOrEqual(0);
    expect(m.value('vault_rollout_continuation_oldest_age_seconds')).toBeGreaterThanOrEqual(0);
    // Bounded labels only: no path, no workload name, no namespace, no token.
    expect(m.text).not.toMatch(/secret\/|metrics\/|"good"|"held"|vr-metrics/);
    expect(m.text).not.toContain(BEARER_TOKEN);
    // Alpha never got the halted secret.
    const held = (await getWorkload('alpha', NS, 'Deployment', 'held')) as {
      spec: { template: { metadata?: { annotations?: Record<string, string> } } };
    };
    expect(held.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '').not.toContain(
      'secret/metrics/held',
    );
    // Let the continuations finish: the rollout durations of both outcomes are then in.
    const done = await waitFor(
      async () => {
        const s = await scrape();
        return s.value('vault_rollout_continuations_pending') === 0 ? s : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: 'no continuation left' },
    );
    expect(done.value('vault_rollout_continuation_oldest_age_seconds')).toBe(0);
    // good's rollout complete, held's not (its pods never become Ready: the continuation sees it time out or fail).
    const complete =
      done.value('vault_rollout_rollout_duration_seconds_count{cluster="gamma",outcome="complete"}') ?? 0;
    const notComplete =
      (done.value('vault_rollout_rollout_duration_seconds_count{cluster="gamma",outcome="timeout"}') ?? 0) +
      (done.value('vault_rollout_rollout_duration_seconds_count{cluster="gamma",outcome="failed"}') ?? 0);
    expect([complete, notComplete]).toEqual([1, 1]);
    expect(done.value('vault_rollout_rollout_duration_seconds_count{cluster="alpha",outcome="complete"}')).toBe(1);
    expect(done.value('vault_rollout_queue_oldest_message_age_seconds')).toBe(0);
  }, 240_000);
});
