/** `rollout.window` in the routing table: strict fields, each error with file, line and field. */
import { problemsOf as problems } from './problems.ts';
import { describe, expect, it } from 'vitest';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';

const yaml = (top: string, route = '') => `clusters:
  alpha: { kubeconfig: { env: A }, labels: { env: prod } }
  gamma: { kubeconfig: { env: C }, labels: { env: staging } }
${top}routes:
  - name: app
    match: { path: "secret/app" }
${route}    targets:
      - { clusters: [alpha, gamma], namespace: ns, kind: Deployment, name: app }
`;
const win = (fields: string) => `rollout:\n  window: { ${fields} }\n`;

describe('rollout.window in the routing table', () => {
  it.each([
    [
      'a time without two digits',
      win('days: [Mon], from: "9:00", to: "17:00", timeZone: UTC'),
      'rollout.window.from: must be a 24-hour time HH:MM',
    ],
    [
      'an hour past 23',
      win('days: [Mon], from: "22:00", to: "24:00", timeZone: UTC'),
      'rollout.window.to: must be a 24-hour time HH:MM',
    ],
    [
      'an unknown zone',
      win('days: [Mon], from: "22:00", to: "23:00", timeZone: Mars/Olympus'),
      'rollout.window.timeZone: unknown time zone "Mars/Olympus"',
    ],
    [
      'a long day name',
      win('days: [Monday], from: "22:00", to: "23:00", timeZone: UTC'),
      'rollout.window.days[0]: must be one of Mon, Tue, Wed, Thu, Fri, Sat, Sun',
    ],
    [
      'a day twice',
      win('days: [Mon, Mon], from: "22:00", to: "23:00", timeZone: UTC'),
      'rollout.window.days: a day is listed twice',
    ],
    [
      'no day',
      win('days: [], from: "22:00", to: "23:00", timeZone: UTC'),
      'rollout.window.days: list at least one day',
    ],
    [
      'more than seven days',
      win('days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun, Mon], from: "22:00", to: "23:00", timeZone: UTC'),
      'rollout.window.days: at most 7 days',
    ],
    [
      'no length',
      win('days: [Mon], from: "22:00", to: "22:00", timeZone: UTC'),
      'rollout.window.to: from and to are the same time',
    ],
    ['an unknown field', win('days: [Mon], from: "22:00", to: "23:00", timeZone: UTC, until: "x"'), 'rollout.window'],
    [
      "a wave's window",
      'rollout:\n  waves:\n    - clusters: [gamma]\n      window: { days: [Sun], from: "01:00", to: "1:00", timeZone: UTC }\n',
      'rollout.waves[0].window.to: must be a 24-hour time HH:MM',
    ],
  ])('%s', (_, top, expected) => {
    expect(problems(yaml(top)).join('\n')).toContain(expected);
  });

  it("compiles the window of the route, over the top level's, and of each wave", () => {
    const table = loadRoutingTable(
      yaml(
        'rollout:\n  window: { days: [Mon, Tue], from: "22:00", to: "04:00", timeZone: Europe/Berlin }\n  waves:\n    - clusters: [gamma]\n      window: { days: [Sun], from: "01:00", to: "02:00", timeZone: UTC }\n    - clusters: [alpha]\n',
        '    rollout:\n      window: { days: [Sat], from: "10:00", to: "11:00", timeZone: UTC }\n',
      ),
      'routes.yaml',
    );
    const policy = table.routes[0]?.policy;
    expect(policy?.window?.text).toBe('Sat 10:00-11:00 UTC');
    expect(policy?.waveWindows?.map((x) => x?.text)).toEqual(['Sun 01:00-02:00 UTC', undefined]);
    const top = loadRoutingTable(
      yaml('rollout:\n  window: { days: [Mon, Tue], from: "22:00", to: "04:00", timeZone: Europe/Berlin }\n'),
      'routes.yaml',
    );
    expect(top.routes[0]?.policy.window).toMatchObject({ fromMinute: 1320, toMinute: 240, timeZone: 'Europe/Berlin' });
    expect([...(top.routes[0]?.policy.window?.days ?? [])]).toEqual([0, 1]);
  });
});
