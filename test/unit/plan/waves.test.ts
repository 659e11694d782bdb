/** Progressive rotation, the pure half: waves from the routing table, gate decisions, settle windows. */
import { describe, expect, it } from 'vitest';
import { changesByCluster, firstWaveMessages } from '../../../lib/pipeline/intake.ts';
import { planGate } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import {
  decideGate,
  orderWaves,
  planChangeSets,
  settleDelay,
  SETTLE_MAX_WINDOWS,
  type GateInput,
  type WaveTargetState,
} from '../../../lib/plan/waves.ts';
import { gateGroupId, isGateMessage, messageGroupId, type GateMessage } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  alpha: { kubeconfig: { env: A }, labels: { env: prod } }
  beta: { kubeconfig: { env: B }, labels: { env: prod } }
  gamma: { kubeconfig: { env: C }, labels: { env: staging } }
  delta: { kubeconfig: { env: D } }
rollout:
  waves: [{ clusters: { env: staging } }, { clusters: [alpha] }, { clusters: { env: prod } }]
  gate: { timeout: 2m, pause: 30s }
routes:
  - name: app
    match: { path: "secret/app/*" }
    targets: [{ clusters: [alpha, beta, gamma, delta], namespace: ns, kind: Deployment, name: app }]
  - name: flat
    match: { path: "secret/flat" }
    rollout: { waves: [{ clusters: [beta] }], gate: { pause: 0s }, settle: 5s }
    targets: [{ clusters: [alpha, beta], namespace: ns, kind: Deployment, name: flat }]
  - name: alpha-only
    match: { path: "secret/alpha" }
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: a }]
`);

const change = (key: string, version: number): SecretChange => kvWrite(key, version);

function sets(...changes: SecretChange[]) {
  const plan = planRollouts(table, changes);
  const clustersOf = new Map<SecretChange, string[]>();
  for (const [cluster, cs] of changesByCluster(changes, plan))
    for (const c of cs) clustersOf.set(c, [...(clustersOf.get(c) ?? []), cluster]);
  return planChangeSets(table, changes, plan, (c) => clustersOf.get(c) ?? []);
}

describe('waves', () => {
  it.each([
    ['no waves: one wave, everything', undefined, ['b', 'a'], [['a', 'b']]],
    ['in order, a cluster in its first wave only', [['c'], ['a'], ['a', 'b']], ['a', 'b', 'c'], [['c'], ['a'], ['b']]],
    ['clusters in no wave go last, as one wave', [['a']], ['a', 'b', 'c'], [['a'], ['b', 'c']]],
    ['waves that reach no cluster are dropped', [['x'], ['b'], ['y']], ['b'], [['b']]],
    ['nothing reached: no wave', [['a']], [], []],
  ] as const)('%s', (_, waves, clusters, expected) => {
    expect(
      orderWaves(waves === undefined ? {} : { waves: waves.map((w) => [...w]) }, clusters).map((w) => w.clusters),
    ).toEqual(expected);
  });

  it('the table: top-level waves by selector and list; a route overrides field by field', () => {
    const app = table.routes.find((r) => r.name === 'app')?.policy;
    expect(app).toEqual({
      waves: [['gamma'], ['alpha'], ['beta']],
      gate: { healthy: true, timeoutMs: 120_000, pauseMs: 30_000 },
      onFailure: 'halt',
      settleMs: 0,
    });
    const flat = table.routes.find((r) => r.name === 'flat')?.policy;
    expect(flat).toEqual({
      waves: [['beta']],
      gate: { healthy: true, timeoutMs: 120_000, pauseMs: 0 },
      onFailure: 'halt',
      settleMs: 5000,
    });
  });

  it('change sets: one per route policy, waves of the clusters each reaches', () => {
    const out = sets(change('app/db', 3), change('flat', 2), change('alpha', 1));
    expect(out.map((s) => [s.route, s.changes.map((c) => c.key), s.waves.map((w) => w.clusters)])).toEqual([
      ['app', ['app/db'], [['gamma'], ['alpha'], ['beta'], ['delta']]],
      ['flat', ['flat'], [['beta'], ['alpha']]],
      ['alpha-only', ['alpha'], [['alpha']]],
    ]);
  });

  it('the intake queues the first wave and one gate per change set with later waves, in its own group', () => {
    const changes = [change('app/db', 3), change('alpha', 1)];
    const messages = firstWaveMessages(table, changes, planRollouts(table, changes), '2026-11-20T10:00:01Z');
    const gate = messages.find(isGateMessage) as GateMessage;
    expect(messages.map((m) => messageGroupId(m))).toEqual(['gamma', gateGroupId(gate.changes), 'alpha']);
    expect(gate.changes.map((c) => c.key)).toEqual(['app/db']);
    expect(gate).toMatchObject({ kind: 'gate', wave: 0, round: 0 });
    expect(gate).not.toHaveProperty('since');
    expect(JSON.stringify(gate)).not.toContain('Deployment');
  });

  it('a gate re-planned by the worker names its change set; the last wave has no gate', () => {
    const changes = [change('app/db', 3)];
    const gate = firstWaveMessages(table, changes, planRollouts(table, changes), '2026-11-20T10:00:01Z').find(
      isGateMessage,
    ) as GateMessage;
    const planned = planGate(table, gate, 'm1');
    expect('set' in planned && planned.set.waves.map((w) => w.clusters)).toEqual([
      ['gamma'],
      ['alpha'],
      ['beta'],
      ['delta'],
    ]);
    expect(planGate(table, { ...gate, wave: 3 }, 'm1')).toEqual({
      refused: expect.stringContaining('not followed by another wave'),
    });
    const other = loadRoutingTable('clusters: { alpha: { kubeconfig: { env: A } } }\nroutes: []\n');
    expect(planGate(other, gate, 'm1')).toEqual({ refused: expect.stringContaining('plan nothing') });
  });
});

const s = (state: WaveTargetState['state'], name = 'app'): WaveTargetState => ({
  cluster: 'gamma',
  namespace: 'ns',
  kind: 'Deployment',
  name,
  state,
  reason: state === 'failed' ? 'ProgressDeadlineExceeded' : '',
});
const gate = (over: Partial<GateInput> & Pick<GateInput, 'states'>): GateInput => ({
  now: 100_000,
  since: 0,
  policy: { gate: { healthy: true, timeoutMs: 600_000, pauseMs: 30_000 }, onFailure: 'halt' },
  recheckMs: 10_000,
  ...over,
});

describe('decideGate: states read back -> next action', () => {
  it.each([
    [
      'all complete, no pause yet: wait the pause, remember when',
      gate({ states: [s('complete'), s('done', 'b')] }),
      { action: 'wait', delayMs: 30_000, completeAt: 100_000 },
    ],
    [
      'complete and the pause is over: advance',
      gate({ states: [s('complete')], completeAt: 60_000 }),
      { action: 'advance' },
    ],
    [
      'complete, pause 0: advance at once',
      gate({
        states: [s('complete')],
        policy: { gate: { healthy: true, timeoutMs: 600_000, pauseMs: 0 }, onFailure: 'halt' },
      }),
      { action: 'advance' },
    ],
    [
      'one still rolling: look again later',
      gate({ states: [s('complete'), s('progressing', 'b')] }),
      { action: 'wait', delayMs: 10_000 },
    ],
    [
      'not restarted yet (its cluster message is queued): wait',
      gate({ states: [s('pending')] }),
      { action: 'wait', delayMs: 10_000 },
    ],
    [
      'the recheck never overshoots the gate timeout',
      gate({ states: [s('progressing')], now: 595_000 }),
      { action: 'wait', delayMs: 5000 },
    ],
    [
      'one failed: halt, naming it',
      gate({ states: [s('complete'), s('failed', 'b')] }),
      { action: 'fail', onFailure: 'halt', failing: { name: 'b', state: 'failed' } },
    ],
    ['one timed out: halt', gate({ states: [s('timeout')] }), { action: 'fail', onFailure: 'halt' }],
    [
      'past gate.timeout while progressing: fail',
      gate({ states: [s('progressing')], now: 600_000 }),
      { action: 'fail', why: expect.stringContaining('gate.timeout') },
    ],
    [
      'onFailure continue: fail says continue',
      gate({
        states: [s('failed')],
        policy: { gate: { healthy: true, timeoutMs: 600_000, pauseMs: 0 }, onFailure: 'continue' },
      }),
      { action: 'fail', onFailure: 'continue' },
    ],
    [
      'healthy false: restarted is enough',
      gate({
        states: [s('progressing')],
        policy: { gate: { healthy: false, timeoutMs: 600_000, pauseMs: 0 }, onFailure: 'halt' },
      }),
      { action: 'advance' },
    ],
    [
      'healthy false still waits for the restart',
      gate({
        states: [s('pending')],
        policy: { gate: { healthy: false, timeoutMs: 600_000, pauseMs: 0 }, onFailure: 'halt' },
      }),
      { action: 'wait' },
    ],
  ] as const)('%s', (_, input, expected) => {
    expect(decideGate(input)).toMatchObject(expected);
  });
});

const approving = {
  gate: { healthy: true, timeoutMs: 600_000, pauseMs: 0, approval: true },
  onFailure: 'halt',
} as const;

describe('decideGate with gate.approval: the next wave also waits for a person', () => {
  it.each([
    [
      'complete, not approved: waits for approval, at the recheck cadence',
      gate({ states: [s('complete')], policy: approving }),
      { action: 'wait', approval: true, delayMs: 10_000, why: 'waits for approval' },
    ],
    [
      'waiting 2 minutes for approval: looks a quarter of the wait apart (30 s)',
      gate({ states: [s('complete')], policy: approving, completeAt: 100_000 - 120_000 }),
      { action: 'wait', approval: true, delayMs: 30_000, why: 'waits for approval' },
    ],
    [
      'waiting an hour for approval: one look a minute, no fewer',
      gate({ states: [s('complete')], policy: approving, completeAt: 100_000 - 3_600_000 }),
      { action: 'wait', approval: true, delayMs: 60_000, why: 'waits for approval' },
    ],
    [
      'complete and approved: advance',
      gate({ states: [s('complete')], policy: approving, approvedAt: 90_000 }),
      { action: 'advance' },
    ],
    [
      'still rolling: waits for the wave, not for approval',
      gate({ states: [s('progressing')], policy: approving }),
      { action: 'wait', delayMs: 10_000, why: '1 target(s) not complete' },
    ],
    [
      'an approval never passes a failed wave',
      gate({ states: [s('failed')], policy: approving, approvedAt: 90_000 }),
      { action: 'fail', onFailure: 'halt' },
    ],
    [
      'an approval never passes a wave still rolling',
      gate({ states: [s('progressing')], policy: approving, approvedAt: 90_000 }),
      { action: 'wait', why: '1 target(s) not complete' },
    ],
    [
      'the pause comes first, then the approval',
      gate({ states: [s('complete')], policy: { ...approving, gate: { ...approving.gate, pauseMs: 30_000 } } }),
      { action: 'wait', delayMs: 30_000, why: 'wave complete; pausing' },
    ],
    [
      'approval false (the default): an approval is not asked',
      gate({ states: [s('complete')], policy: { ...approving, gate: { ...approving.gate, approval: false } } }),
      { action: 'advance' },
    ],
  ] as const)('%s', (_, input, expected) => {
    const decision = decideGate(input);
    expect(decision).toMatchObject(expected);
    if (!('approval' in expected)) expect(decision).not.toHaveProperty('approval');
  });
});

describe('settleDelay', () => {
  it.each([
    ['no settle: now', [0], 0, 1000, 0],
    ['newest too young: wait until it is settle old', [0, 3000], 5000, 4000, 4000],
    ['quiet for settle: now', [0, 3000], 5000, 8000, 0],
    [
      'a secret that keeps changing: at most SETTLE_MAX_WINDOWS windows after the first',
      [0, 19_000],
      5000,
      19_500,
      SETTLE_MAX_WINDOWS * 5000 - 19_500,
    ],
    ['past the bound: now', [0, 20_500], 5000, 21_000, 0],
  ] as const)('%s', (_, accepted, settle, now, delay) => expect(settleDelay(accepted, settle, now)).toBe(delay));
});

describe('plan shows the waves', () => {
  it('in order, per target, with the gates between them; --json gains waves', async () => {
    const { planJson, planText } = await import('../../../lib/report/plan-report.ts');
    const { changeSets } = await import('../../../lib/pipeline/intake.ts');
    const changes = [change('app/db', 3)];
    const plan = planRollouts(table, changes);
    const parsed = { changes, ignored: [], rejected: [] };
    const text = planText(parsed, plan, changeSets(table, changes, plan));
    expect(text).toContain('Waves of secret/app/db@v3 (route app):');
    const lines = text.split('\n');
    const at = (s: string) => lines.findIndex((l) => l.includes(s));
    expect(at('1     gamma')).toBeLessThan(
      at('-- gate: every target complete within 2m, then pause 30s; on failure: halt --'),
    );
    expect(at('2     alpha')).toBeLessThan(at('3     beta'));
    expect(at('4     delta')).toBeGreaterThan(at('3     beta'));
    const json = planJson(parsed, plan, changeSets(table, changes, plan));
    expect(json.waves[0]?.waves.map((w) => [w.wave, w.clusters, w.targets.map((t) => t.name), w.gate?.pause])).toEqual([
      [1, ['gamma'], ['app'], '30s'],
      [2, ['alpha'], ['app'], '30s'],
      [3, ['beta'], ['app'], '30s'],
      [4, ['delta'], ['app'], undefined],
    ]);
  });
});
