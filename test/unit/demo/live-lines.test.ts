import { describe, expect, it } from 'vitest';
import { replicaSetLine, serveLogToLines } from '../../demo/live-lines.ts';

const log = (fields: Record<string, unknown>): string => JSON.stringify({ level: 'INFO', timestamp: '2026-11-23T20:05:37.000Z', service: 'vault-rollout', ...fields });

describe('what npm start shows of serve\'s log', () => {
  it.each([
    ['an accepted change, with its version and the targets planned', log({ message: 'accepted', changes: [{ id: 'x', path: 'secret/shared/tls', version: 3 }], targets: 4 }), ['change    secret/shared/tls v3 -> 4 target(s) planned']],
    ['a change without a version (KV v1)', log({ message: 'accepted', changes: [{ id: 'x', path: 'legacy/batch/nightly', version: null }], targets: 2 }), ['change    legacy/batch/nightly -> 2 target(s) planned']],
    ['a batch without changes', log({ message: 'accepted', changes: [], targets: 0 }), []],
    ['each workload worked, per cluster', log({ message: 'rollout message done', cluster: 'alpha', results: [{ namespace: 'edge', kind: 'Deployment', name: 'web', outcome: 'restarted', reason: '' }, { namespace: 'edge', kind: 'DaemonSet', name: 'ingress-proxy', outcome: 'failed', reason: 'forbidden' }] }), ['restarted alpha  edge/Deployment/web', 'failed    alpha  edge/DaemonSet/ingress-proxy (forbidden)']],
    ['a warning, with its reason', JSON.stringify({ level: 'WARN', message: 'request refused', reason: 'bad signature' }), ['warning   serve: request refused (bad signature)']],
    ['other info lines', log({ message: 'something else' }), []],
    ['an EMF metrics document', JSON.stringify({ _aws: { CloudWatchMetrics: [] }, ChangesReceived: 1 }), []],
    ['a line that is not JSON', 'vault-rollout serve: listening', []],
    ['JSON that is not an object', '42', []],
  ])('%s', (_what, line, expected) => {
    expect(serveLogToLines(line)).toEqual(expected);
  });

  it('bounds what one line can show', () => {
    const changes = Array.from({ length: 100 }, (_, i) => ({ path: `secret/p${i}`, version: 1 }));
    expect(serveLogToLines(log({ message: 'accepted', changes, targets: 0 }))).toHaveLength(20);
  });

  it('names the cluster, the Deployment and its new ReplicaSet', () => {
    expect(replicaSetLine('beta', 'edge', 'web', 'web-9849cd44')).toBe('rollout   beta   edge/Deployment/web: new ReplicaSet web-9849cd44');
  });
});
