/** `vault-rollout notify test`: a sample to each sink, reported per sink; never a URL or a secret in the report. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { memoryIo } from '../../helpers.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});
async function receiver(status: number, bodies: string[]): Promise<string> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(status).end();
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/services/T000/B000/secretpart`;
}

const routes = `clusters:
  alpha: { kubeconfig: { env: A } }
notifications:
  sinks:
    ops: { type: slack, urlFromEnv: SLACK_URL }
    chat: { type: teams, urlFromEnv: TEAMS_URL }
    audit: { type: webhook, urlFromEnv: AUDIT_URL, secretFromEnv: AUDIT_KEY }
routes:
  - name: app
    match: { path: "secret/app" }
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: app }]
`;

describe('vault-rollout notify test', () => {
  it('sends a sample to each sink and reports sent, failed and not usable per sink (exit 1 when any did not take it)', async () => {
    const slack: string[] = [];
    const teams: string[] = [];
    const slackUrl = await receiver(200, slack);
    const teamsUrl = await receiver(500, teams);
    const io = memoryIo(
      { 'routes.yaml': routes },
      { SLACK_URL: slackUrl, TEAMS_URL: teamsUrl, VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1' },
    );
    const code = await main(['notify', 'test', '--routes', 'routes.yaml', '--json'], io);
    expect(code).toBe(1);
    const report = JSON.parse(io.out) as { sinks: Array<{ sink: string; outcome: string; detail: string }> };
    expect(report.sinks.map((s) => [s.sink, s.outcome, s.detail])).toEqual([
      ['audit', 'not usable', 'AUDIT_URL is not set'],
      ['chat', 'failed', 'sink chat: HTTP 500'],
      ['ops', 'sent', ''],
    ]);
    expect(JSON.parse(slack[0] ?? '{}')).toHaveProperty('blocks');
    expect(JSON.parse(teams[0] ?? '{}')).toMatchObject({ type: 'message' });
    expect(io.out + io.err).not.toContain('secretpart');
  });

  it('exit 0 when every sink took the sample; a table without sinks is an error', async () => {
    const slackUrl = await receiver(200, []);
    const only = routes.replace(/ {4}chat:.*\n {4}audit:.*\n/, '');
    const io = memoryIo(
      { 'routes.yaml': only },
      { SLACK_URL: slackUrl, VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1' },
    );
    expect(await main(['notify', 'test', '--routes', 'routes.yaml'], io)).toBe(0);
    expect(io.out).toMatch(/ops\s+slack\s+sent/);
    const none = memoryIo({ 'routes.yaml': routes.replace(/notifications:[\s\S]*?routes:/, 'routes:') });
    expect(await main(['notify', 'test', '--routes', 'routes.yaml'], none)).toBe(1);
    expect(none.err).toContain('configures no notification sink');
  });
});
