/** The `notifications:` block: sinks, events, the progressing limit; secrets only by environment variable. */
import { describe, expect, it } from 'vitest';
import { NotificationEvents } from '../../../lib/routing/notifications-schema.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { problemsOf as problems } from './problems.ts';

const yaml = (top: string, route = '') => `clusters:
  alpha: { kubeconfig: { env: A } }
${top}routes:
  - name: app
    match: { path: "secret/app" }
${route}    targets:
      - { clusters: [alpha], namespace: ns, kind: Deployment, name: app }
  - name: other
    match: { path: "secret/other" }
    targets:
      - { clusters: [alpha], namespace: ns, kind: Deployment, name: other }
`;

describe('notifications in the routing table', () => {
  it.each([
    [
      'a Slack URL written in the table',
      'notifications:\n  sinks:\n    ops: { type: slack, url: "https://hooks.slack.com/services/T/B/X" }\n',
      'notifications.sinks.ops',
    ],
    [
      'a lowercase variable name',
      'notifications:\n  sinks:\n    ops: { type: slack, urlFromEnv: slack_url }\n',
      'must be an environment variable name',
    ],
    [
      'a webhook with a plain http URL',
      'notifications:\n  sinks:\n    audit: { type: webhook, url: "http://example.com/hook", secretFromEnv: K }\n',
      'must be an https URL',
    ],
    [
      'a webhook with both url and urlFromEnv',
      'notifications:\n  sinks:\n    audit: { type: webhook, url: "https://example.com/hook", urlFromEnv: U, secretFromEnv: K }\n',
      'give exactly one of url or urlFromEnv',
    ],
    [
      'a webhook without its HMAC key',
      'notifications:\n  sinks:\n    audit: { type: webhook, url: "https://example.com/hook" }\n',
      'notifications.sinks.audit',
    ],
    [
      'an SNS topic that is not an ARN',
      'notifications:\n  sinks:\n    pager: { type: sns, topicArn: "arn:aws:sqs:us-east-1:123456789012:q" }\n',
      'must be an SNS topic ARN',
    ],
    ['an unknown event', 'notifications:\n  events: [halted, exploded]\n', 'notifications.events[1]'],
    [
      'an unknown sink type',
      'notifications:\n  sinks:\n    x: { type: pagerduty, urlFromEnv: X }\n',
      'notifications.sinks.x',
    ],
    [
      'a progressing limit that is no duration',
      'notifications: { progressingAfter: soon }\n',
      'notifications.progressingAfter',
    ],
  ])('refuses %s', (_, top, expected) => {
    expect(problems(yaml(top)).join('\n')).toContain(expected);
  });

  it('refuses a route that defines a sink name the table already uses, with other settings (a sink name is one sink)', () => {
    const found = problems(
      yaml(
        'notifications:\n  sinks:\n    ops: { type: slack, urlFromEnv: SLACK_URL }\n',
        '    notifications:\n      sinks:\n        ops: { type: teams, urlFromEnv: TEAMS_URL }\n',
      ),
    ).join('\n');
    expect(found).toContain('routes[0].notifications.sinks.ops');
    expect(found).toContain('the sink name "ops" is already defined at the top level with other settings');
    // The same settings again are the same sink.
    expect(
      problems(
        yaml(
          'notifications:\n  sinks:\n    ops: { type: slack, urlFromEnv: SLACK_URL }\n',
          '    notifications:\n      sinks:\n        ops: { type: slack, urlFromEnv: SLACK_URL }\n',
        ),
      ),
    ).toEqual([]);
  });

  it('a route adds sinks; its events replace the top-level list', () => {
    const t = loadRoutingTable(
      yaml(
        'notifications:\n  sinks:\n    ops: { type: slack, urlFromEnv: SLACK_URL }\n    audit: { type: webhook, url: "https://audit.example.com/in", secretFromEnv: AUDIT_KEY }\n  events: [halted, complete]\n',
        '    notifications:\n      sinks:\n        chat: { type: teams, urlFromEnv: TEAMS_URL }\n        pager: { type: sns, topicArn: "arn:aws:sns:eu-west-1:123456789012:pager" }\n      events: [halted]\n      progressingAfter: 2m\n',
      ),
    );
    const [app, other] = t.routes;
    expect(Object.fromEntries(app?.notifications.sinks ?? [])).toEqual({
      ops: { type: 'slack', urlFromEnv: 'SLACK_URL' },
      chat: { type: 'teams', urlFromEnv: 'TEAMS_URL' },
      audit: { type: 'webhook', url: 'https://audit.example.com/in', secretFromEnv: 'AUDIT_KEY' },
      pager: { type: 'sns', topicArn: 'arn:aws:sns:eu-west-1:123456789012:pager' },
    });
    expect([...(app?.notifications.events ?? [])]).toEqual(['halted']);
    expect(app?.notifications.progressingAfterMs).toBe(120_000);
    expect([...(other?.notifications.sinks.keys() ?? [])]).toEqual(['ops', 'audit']);
    expect([...(other?.notifications.events ?? [])]).toEqual(['halted', 'complete']);
    expect(other?.notifications.progressingAfterMs).toBe(15 * 60_000);
    expect([...t.allSinks.keys()].sort()).toEqual(['audit', 'chat', 'ops', 'pager']);
  });

  it('a table without notifications has no sinks and every event kind by default', () => {
    const t = loadRoutingTable(yaml(''));
    expect(t.allSinks.size).toBe(0);
    expect(t.notifications.events.size).toBe(NotificationEvents.length);
  });
});
