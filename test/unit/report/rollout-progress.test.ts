import { describe, expect, it } from 'vitest';
import { applyCommand } from '../../../lib/cli/apply-command.ts';
import type { RolloutResult } from '../../../lib/engine/rollout-executor.ts';
import { progressFrame, progressView } from '../../../lib/report/rollout-progress.ts';
import { resultsText } from '../../../lib/report/results-report.ts';
import { memoryIo } from '../../helpers.ts';

const result = (name: string, extra: Partial<RolloutResult> = {}): RolloutResult => ({
  cluster: 'alpha',
  namespace: 'ns',
  kind: 'Deployment',
  name,
  outcome: 'restarted',
  reason: '',
  attempts: 1,
  durationMs: 5,
  routes: ['r'],
  paths: ['secret/x'],
  restartToken: 't',
  ...extra,
});

describe('rollout progress', () => {
  it('a frame lists the unfinished first with ready counts', () => {
    const frame = progressFrame(
      [
        result('done', {
          rollout: 'complete',
          pods: { desired: 3, updated: 3, ready: 3 },
          rolloutReason: '3 new pods available',
        }),
        result('busy', {
          rollout: 'progressing',
          pods: { desired: 3, updated: 1, ready: 0 },
          rolloutReason: '1 of 3 new pods created',
        }),
      ],
      12_000,
    );
    const lines = frame.trimEnd().split('\n');
    expect(lines[0]).toBe('Waiting for rollouts: 1 of 2 in progress, 12 s');
    expect(lines[2]).toMatch(
      /^ {2}alpha +ns\/Deployment\/busy +restarted +progressing +0\/3 +1 of 3 new pods created$/,
    );
    expect(lines[3]).toMatch(/ns\/Deployment\/done +restarted +complete +3\/3/);
  });

  it('without a terminal, writes one line per change of state, not per event', () => {
    const out: string[] = [];
    const view = progressView((t) => out.push(t), false);
    view.update(result('api'));
    view.update(result('api', { rollout: 'progressing', pods: { desired: 3, updated: 1, ready: 0 } }));
    view.update(
      result('api', {
        rollout: 'progressing',
        pods: { desired: 3, updated: 1, ready: 0 },
        rolloutReason: 'other words',
      }),
    );
    view.update(
      result('api', {
        rollout: 'complete',
        pods: { desired: 3, updated: 3, ready: 3 },
        rolloutReason: '3 new pods available',
      }),
    );
    view.close();
    expect(out).toEqual([
      'alpha ns/Deployment/api: restarted\n',
      'alpha ns/Deployment/api: restarted progressing 0/3\n',
      'alpha ns/Deployment/api: restarted complete 3/3 (3 new pods available)\n',
    ]);
  });

  it('the final table shows rollout, ready pods, time and the reason of a failed rollout', () => {
    const text = resultsText(
      { changes: [], ignored: [], rejected: [] } as never,
      { targets: [], routed: [], problems: [] },
      [
        result('api', {
          rollout: 'complete',
          rolloutMs: 12_345,
          pods: { desired: 3, updated: 3, ready: 3 },
          rolloutReason: '3 new pods available',
        }),
        result('never', {
          rollout: 'failed',
          pods: { desired: 3, updated: 3, ready: 1 },
          rolloutReason: '2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded',
        }),
      ],
    );
    expect(text).toContain('Rollouts: 1 complete, 1 failed');
    expect(text).toMatch(/api +restarted +complete +3\/3 +12\.3\n/);
    expect(text).toMatch(
      /never +restarted +failed +1\/3 +- +2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded/,
    );
  });

  it('apply refuses a --timeout that is no duration', async () => {
    const io = memoryIo();
    expect(await applyCommand(['--routes', 'r.yaml', '--timeout', 'soon'], io)).toBe(64);
    expect(io.err).toContain('--timeout soon: a duration such as 500ms, 30s, 10m, 1h or 1m30s');
  });
});
