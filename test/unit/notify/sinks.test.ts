/**
 * Sinks: secrets from the environment, https only, no link-local or metadata address, signed in a context of their own
 * (the intake never takes a notification's signature), a key that is none of the intake's, bounded time.
 */
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { mockClient } from 'aws-sdk-client-mock';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { authenticate, ReplayGuard } from '../../../lib/http/webhook-auth.ts';
import { rotationEvent } from '../../../lib/notify/event.ts';
import {
  ALLOW_LINK_LOCAL_ENV,
  ALLOW_LOOPBACK_HTTP_ENV,
  resolveSinks,
  sinkEnvironment,
  sinkTopics,
  sinkVariables,
  urlProblem,
  verifyNotification,
} from '../../../lib/notify/sinks.ts';
import type { NotificationSink } from '../../../lib/routing/notifications-schema.ts';

const event = rotationEvent({
  kind: 'complete',
  rotation: 'r1',
  route: 'app',
  at: '2026-11-27T10:00:00.000Z',
  secrets: ['secret/app/db version 2'],
  clusters: ['alpha'],
});
const KEY = 'notify-hmac-key-0123456789';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise((r) => {
          s.closeAllConnections();
          s.close(r);
        }),
    ),
  );
});

/** A loopback receiver: answers `status` (or never, when `hang`), records what it got. */
async function receiver(
  status = 200,
  hang = false,
): Promise<{ url: string; got: Array<{ headers: IncomingMessage['headers']; body: Buffer }> }> {
  const got: Array<{ headers: IncomingMessage['headers']; body: Buffer }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      if (!hang) res.writeHead(status).end('https://hooks.example/echoed-secret-url');
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}

const one = (config: NotificationSink, env: Record<string, string>, timeoutMs?: number) =>
  resolveSinks(new Map([['s', config]]), {
    env: { [ALLOW_LOOPBACK_HTTP_ENV]: '1', ...env },
    ...(timeoutMs ? { timeoutMs } : {}),
  });

describe('notification sinks', () => {
  it.each([
    ['missing', undefined, {}, 'SLACK_URL is not set'],
    ['not a URL', 'nope', {}, 'SLACK_URL is not a URL'],
    [
      'plain http to another host',
      'http://hooks.example.com/x',
      { [ALLOW_LOOPBACK_HTTP_ENV]: '1' },
      'must be an https URL',
    ],
    [
      'plain http to loopback without the flag',
      'http://127.0.0.1:9/x',
      {},
      `plain http to loopback only with ${ALLOW_LOOPBACK_HTTP_ENV}=1`,
    ],
    ['credentials in the URL', 'https://u:p@hooks.example.com/x', {}, 'credentials'],
  ])('a URL %s is refused, and the problem never quotes it', (_, url, env, expected) => {
    const problem = urlProblem(url, 'SLACK_URL', env);
    expect(problem).toContain(expected);
    if (url) expect(problem).not.toContain(url);
  });
  it('Lambda: the variables the sinks name are read from SSM by name under the prefix, unless the environment has them', async () => {
    const sinks = new Map<string, NotificationSink>([
      ['ops', { type: 'slack', urlFromEnv: 'SLACK_URL' }],
      ['audit', { type: 'webhook', urlFromEnv: 'AUDIT_URL', secretFromEnv: 'AUDIT_KEY' }],
      ['fixed', { type: 'webhook', url: 'https://audit.example.com/in', secretFromEnv: 'AUDIT_KEY' }],
      ['pager', { type: 'sns', topicArn: 'arn:aws:sns:eu-west-1:123456789012:pager' }],
    ]);
    expect(sinkVariables(sinks)).toEqual(['AUDIT_KEY', 'AUDIT_URL', 'SLACK_URL']);
    expect(sinkTopics(sinks)).toEqual(['arn:aws:sns:eu-west-1:123456789012:pager']);
    const asked: string[] = [];
    const read = (name: string) => {
      asked.push(name);
      return Promise.resolve(name === '/vr/dev/notify/SLACK_URL' ? 'https://hooks.slack.example/x' : undefined);
    };
    const env = await sinkEnvironment(
      sinks,
      { AUDIT_URL: 'https://from-env.example/in', OTHER: 'kept' },
      '/vr/dev/notify/',
      read,
    );
    expect(asked).toEqual(['/vr/dev/notify/AUDIT_KEY', '/vr/dev/notify/SLACK_URL']);
    expect(env).toEqual({
      AUDIT_URL: 'https://from-env.example/in',
      OTHER: 'kept',
      AUDIT_KEY: undefined,
      SLACK_URL: 'https://hooks.slack.example/x',
    });
    // A missing parameter leaves its sink not usable, by name.
    expect([...resolveSinks(sinks, { env }).problems.keys()].sort()).toEqual(['audit', 'fixed']);
  });

  it('accepts https, and loopback http with the flag', () => {
    expect(urlProblem('https://hooks.slack.com/services/T/B/X', 'U', {})).toBeUndefined();
    expect(urlProblem('http://127.0.0.1:8080/x', 'U', { [ALLOW_LOOPBACK_HTTP_ENV]: '1' })).toBeUndefined();
  });

  it("webhook: signed in the notification context; a receiver's check accepts it, the intake refuses it even with the same key", async () => {
    const r = await receiver();
    const { sinks, problems } = one(
      { type: 'webhook', urlFromEnv: 'HOOK_URL', secretFromEnv: 'HOOK_KEY' },
      { HOOK_URL: r.url, HOOK_KEY: KEY },
    );
    expect(problems.size).toBe(0);
    await sinks.get('s')?.send(event);
    const [got] = r.got;
    if (!got) throw new Error('nothing received');
    const header = (n: string) => got.headers[n] as string | undefined;
    expect(header('x-vault-rollout-event-id')).toBe(event.id);
    const now = Math.floor(Date.now() / 1000);
    expect(verifyNotification(KEY, header, got.body, now)).toEqual({ ok: true });
    expect(verifyNotification(KEY, header, Buffer.concat([got.body, Buffer.from(' ')]), now)).toMatchObject({
      ok: false,
    });
    expect(verifyNotification(KEY, header, got.body, now + 301)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('300 s'),
    });
    // Domain separation: posted to an intake that holds the same key, the notification is no change.
    expect(authenticate(header, got.body, { hmacSecret: KEY }, now, new ReplayGuard())).toEqual({
      ok: false,
      reason: 'the signature does not match the body',
    });
    expect(JSON.parse(got.body.toString())).toMatchObject({
      schema: 'vault-rollout.notification/v1',
      id: event.id,
      kind: 'complete',
    });
    expect(got.body.toString()).not.toContain(KEY);
  });

  it.each(['VAULT_ROLLOUT_WEBHOOK_SECRET', 'VAULT_ROLLOUT_WEBHOOK_TOKEN', 'VAULT_ROLLOUT_STATUS_TOKEN'])(
    "a webhook whose key is the intake's %s is not usable",
    (intake) => {
      const problem = one(
        { type: 'webhook', url: 'https://a.example/x', secretFromEnv: 'K' },
        { K: KEY, [intake]: KEY },
      ).problems.get('s');
      expect(problem).toBe(
        `K is the same key as ${intake}: give notifications a key of their own (a receiver holding it could sign changes)`,
      );
    },
  );

  it.each([
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'https://169.254.170.2/v2/credentials',
    'https://[fe80::1]/x',
    'https://[fd00:ec2::254]/latest/meta-data/',
    'https://metadata.google.internal/computeMetadata/v1/',
    'https://100.100.100.200/latest/meta-data/',
  ])('a link-local or metadata URL is refused unless allowed: %s', (url) => {
    expect(urlProblem(url, 'HOOK_URL', {})).toBe(
      `HOOK_URL: a link-local or cloud metadata address is refused (${ALLOW_LINK_LOCAL_ENV}=1 allows it)`,
    );
    if (url.startsWith('https:')) expect(urlProblem(url, 'HOOK_URL', { [ALLOW_LINK_LOCAL_ENV]: '1' })).toBeUndefined();
  });

  it('a host name that resolves to a metadata address is refused before anything is sent', async () => {
    let fetched = 0;
    const { sinks } = resolveSinks(new Map([['s', { type: 'slack', urlFromEnv: 'U' } as NotificationSink]]), {
      env: { U: 'https://hooks.example.com/x' },
      lookup: async () => ['203.0.113.7', '169.254.169.254'],
      fetch: async () => ((fetched += 1), new Response('')),
    });
    const err = await sinks
      .get('s')
      ?.send(event)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err?.message).toBe(
      `sink s: the host resolves to a link-local or cloud metadata address; refused (${ALLOW_LINK_LOCAL_ENV}=1 allows it)`,
    );
    expect(fetched).toBe(0);
  });

  it('a webhook without its key, or with a short one, is not usable', () => {
    expect(one({ type: 'webhook', url: 'https://a.example/x', secretFromEnv: 'K' }, {}).problems.get('s')).toContain(
      'K is not set',
    );
    expect(
      one({ type: 'webhook', url: 'https://a.example/x', secretFromEnv: 'K' }, { K: 'short' }).problems.get('s'),
    ).toContain('shorter than 16');
  });

  it('Slack and Teams post JSON to the URL from the environment; a 500 is an error naming the sink and status only', async () => {
    const ok = await receiver();
    await one({ type: 'slack', urlFromEnv: 'SLACK_URL' }, { SLACK_URL: ok.url }).sinks.get('s')?.send(event);
    expect(JSON.parse(ok.got[0]?.body.toString() ?? '{}')).toHaveProperty('blocks');
    const bad = await receiver(500);
    const err = await one({ type: 'teams', urlFromEnv: 'TEAMS_URL' }, { TEAMS_URL: bad.url })
      .sinks.get('s')
      ?.send(event)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err?.message).toBe('sink s: HTTP 500');
    expect(JSON.parse(bad.got[0]?.body.toString() ?? '{}')).toMatchObject({ type: 'message' });
  });

  it('a receiver that never answers is cut at the sink timeout', async () => {
    const hang = await receiver(200, true);
    const started = Date.now();
    const err = await one({ type: 'slack', urlFromEnv: 'U' }, { U: hang.url }, 300)
      .sinks.get('s')
      ?.send(event)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err?.message).toBe('sink s: no answer within 300 ms');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('a redirect is not followed', async () => {
    const target = await receiver();
    const redirect = createServer((_, res) => res.writeHead(307, { location: target.url }).end());
    servers.push(redirect);
    await new Promise<void>((r) => redirect.listen(0, '127.0.0.1', r));
    const err = await one(
      { type: 'slack', urlFromEnv: 'U' },
      { U: `http://127.0.0.1:${(redirect.address() as AddressInfo).port}/` },
    )
      .sinks.get('s')
      ?.send(event)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(err?.message).toBe('sink s: HTTP 307');
    expect(target.got).toHaveLength(0);
  });

  it('SNS: one Publish to the topic, the event as JSON; a FIFO topic gets the event id as its deduplication id', async () => {
    const sns = mockClient(SNSClient);
    sns.on(PublishCommand).resolves({ MessageId: 'm1' });
    const client = new SNSClient({
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'test' },
    });
    const sinks = resolveSinks(
      new Map<string, NotificationSink>([
        ['std', { type: 'sns', topicArn: 'arn:aws:sns:eu-west-1:123456789012:ops' }],
        ['fifo', { type: 'sns', topicArn: 'arn:aws:sns:eu-west-1:123456789012:ops.fifo' }],
      ]),
      { env: {}, sns: client },
    ).sinks;
    await sinks.get('std')?.send(event);
    await sinks.get('fifo')?.send(event);
    const calls = sns.commandCalls(PublishCommand).map((c) => c.args[0].input);
    expect(calls[0]).toMatchObject({
      TopicArn: 'arn:aws:sns:eu-west-1:123456789012:ops',
      Subject: 'vault-rollout: Rotation complete secret/app/db version 2',
    });
    expect(calls[0]).not.toHaveProperty('MessageDeduplicationId');
    expect(JSON.parse(calls[0]?.Message ?? '{}')).toMatchObject({ id: event.id, kind: 'complete' });
    expect(calls[1]).toMatchObject({ MessageDeduplicationId: event.id, MessageGroupId: 'r1' });
    sns
      .on(PublishCommand)
      .rejects(
        Object.assign(new Error('AuthorizationError: arn:aws:sns:...'), { name: 'AuthorizationErrorException' }),
      );
    await expect(sinks.get('std')?.send(event)).rejects.toThrow(
      /^sink std: SNS Publish failed: AuthorizationErrorException$/,
    );
    sns.restore();
  });
});
