import { describe, expect, it } from 'vitest';
import { LiveView, sinceText } from '../../demo/live-lines.ts';

const T0 = Date.parse('2026-11-23T20:05:37.000Z');
const at = (ms: number): string => new Date(T0 + ms).toISOString();
const log = (fields: Record<string, unknown>, ms = 0): string =>
  JSON.stringify({ level: 'INFO', timestamp: at(ms), service: 'vault-rollout', ...fields });
type Fields = Record<string, unknown>;
const web = (fields: Fields): Fields => ({ namespace: 'edge', kind: 'Deployment', name: 'web', reason: '', ...fields });
const proxy = (fields: Fields): Fields => ({
  namespace: 'edge',
  kind: 'DaemonSet',
  name: 'ingress-proxy',
  reason: '',
  ...fields,
});
/** serve's line for one cluster's message (`done`) or a continuation's look (`looked`) at `ms`. */
const done = (cluster: string, results: Fields[], ms = 0): string =>
  log({ message: 'rollout message done', cluster, results }, ms);
const looked = (cluster: string, results: Fields[], ms = 0): string =>
  log({ message: 'continuation looked', cluster, results }, ms);
const change = (path: string, version: number | null, targets: number): string =>
  log({ message: 'accepted', changes: [{ id: 'x', path, version }], targets });
const accepted = change('secret/shared/tls', 3, 4);

/** Every line the view shows for these inputs, in order. */
function shown(inputs: Array<string | { replicaSet: [string, string, string, string]; ms: number }>): string[] {
  const view = new LiveView();
  return inputs.flatMap((input) =>
    typeof input === 'string' ? view.serveLine(input, T0) : view.replicaSet(...input.replicaSet, T0 + input.ms),
  );
}

describe("what npm start shows of serve's log", () => {
  it.each([
    [
      'an accepted change, with its version and the targets planned',
      [accepted],
      ['change    secret/shared/tls v3 -> 4 targets planned'],
    ],
    ['one target, singular', [change('a/b', 1, 1)], ['change    a/b v1 -> 1 target planned']],
    [
      'a change without a version (KV v1)',
      [change('legacy/batch/nightly', null, 2)],
      ['change    legacy/batch/nightly -> 2 targets planned'],
    ],
    ['a batch without changes', [log({ message: 'accepted', changes: [], targets: 0 })], []],
    [
      'each workload worked, per cluster',
      [done('alpha', [web({ outcome: 'restarted' }), proxy({ outcome: 'failed', reason: 'forbidden' })])],
      ['restarted alpha  edge/Deployment/web', 'failed    alpha  edge/DaemonSet/ingress-proxy (forbidden)'],
    ],
    [
      'a warning, with its reason',
      [JSON.stringify({ level: 'WARN', message: 'request refused', reason: 'bad signature' })],
      ['warning   serve: request refused (bad signature)'],
    ],
    ['other info lines', [log({ message: 'something else' })], []],
    ['an EMF metrics document', [JSON.stringify({ _aws: { CloudWatchMetrics: [] }, ChangesReceived: 1 })], []],
    ['a line that is not JSON', ['vault-rollout serve: listening'], []],
    ['JSON that is not an object', ['42'], []],
  ])('%s', (_what, lines, expected) => {
    expect(shown(lines)).toEqual(expected);
  });

  it('bounds what one line can show', () => {
    const changes = Array.from({ length: 100 }, (_, i) => ({ path: `secret/p${i}`, version: 1 }));
    expect(new LiveView().serveLine(log({ message: 'accepted', changes, targets: 0 }), T0)).toHaveLength(20);
  });
});

describe("one write: each restart once, each rollout's end once, with the time since the change", () => {
  it("serve's restart, continuations, a redelivery and the new ReplicaSet: one restart line, one end", () => {
    expect(
      shown([
        accepted,
        done(
          'alpha',
          [
            web({ outcome: 'restarted', rollout: 'progressing' }),
            proxy({ outcome: 'restarted', rollout: 'progressing' }),
          ],
          900,
        ),
        { replicaSet: ['alpha', 'edge', 'web', 'web-9849cd44'], ms: 950 },
        // The same message delivered again finds the workloads already restarted.
        done(
          'alpha',
          [
            web({ outcome: 'restarted', rollout: 'progressing' }),
            proxy({ outcome: 'restarted', rollout: 'progressing' }),
          ],
          1_000,
        ),
        looked(
          'alpha',
          [web({ outcome: 'unchanged', rollout: 'complete' }), proxy({ outcome: 'unchanged', rollout: 'progressing' })],
          4_200,
        ),
        looked('alpha', [proxy({ outcome: 'unchanged', rollout: 'complete' })], 8_250),
        // A later look that still reports it complete adds nothing.
        looked('alpha', [proxy({ outcome: 'unchanged', rollout: 'complete' })], 9_000),
      ]),
    ).toEqual([
      'change    secret/shared/tls v3 -> 4 targets planned',
      'restarted alpha  edge/Deployment/web',
      'restarted alpha  edge/DaemonSet/ingress-proxy',
      'complete  alpha  edge/Deployment/web, 4.2 s after the change',
      'complete  alpha  edge/DaemonSet/ingress-proxy, 8.3 s after the change',
    ]);
  });

  it('a ReplicaSet seen before serve says it restarted: the restart, once', () => {
    expect(
      shown([
        accepted,
        { replicaSet: ['beta', 'edge', 'web', 'web-5d8f'], ms: 700 },
        done('beta', [web({ outcome: 'restarted', rollout: 'complete' })], 1_500),
      ]),
    ).toEqual([
      'change    secret/shared/tls v3 -> 4 targets planned',
      'restarted beta   edge/Deployment/web (new ReplicaSet web-5d8f)',
      'complete  beta   edge/Deployment/web, 1.5 s after the change',
    ]);
  });

  it('a rollout that fails or times out says so, with why', () => {
    expect(
      shown([
        accepted,
        done('gamma', [web({ outcome: 'restarted', rollout: 'progressing' })], 500),
        looked(
          'gamma',
          [web({ outcome: 'unchanged', rollout: 'timeout', rolloutReason: 'ProgressDeadlineExceeded' })],
          75_000,
        ),
      ]).slice(1),
    ).toEqual([
      'restarted gamma  edge/Deployment/web',
      'timeout   gamma  edge/Deployment/web (ProgressDeadlineExceeded), 1 min 15 s after the change',
    ]);
  });

  it('the next write of the same secret shows its restart again', () => {
    const once = [done('alpha', [web({ outcome: 'restarted', rollout: 'complete' })], 1_000)];
    expect(shown([accepted, ...once, accepted, ...once]).filter((l) => l.startsWith('restarted'))).toHaveLength(2);
  });

  it.each([
    [0, '0.0 s'],
    [4_249, '4.2 s'],
    [59_940, '59.9 s'],
    [65_000, '1 min 5 s'],
  ])('%i ms reads %s', (ms, text) => {
    expect(sinceText(ms)).toBe(text);
  });
});
