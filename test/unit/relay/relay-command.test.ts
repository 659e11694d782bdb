import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CliIo } from '../../../lib/cli/io.ts';
import { main } from '../../../lib/cli/main.ts';
import { relayCommand } from '../../../lib/cli/relay-command.ts';
import { repoRoot } from '../../helpers.ts';
import { SECRET, sendLines, startFunctionServer, temporaryDir, waitFor } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  vi.unstubAllEnvs();
});

function io(env: Record<string, string> = {}): CliIo & { out: string; err: string } {
  const captured = {
    out: '',
    err: '',
    env,
    stdout: (t: string) => void (captured.out += t),
    stderr: (t: string) => void (captured.err += t),
    readText: (f: string) => readFile(f, 'utf8'),
    openInput: () => {
      throw new Error('not used');
    },
  };
  return captured;
}

const demoLine = readFileSync(`${repoRoot}test/fixtures/demo/rotation.ndjson`, 'utf8').split('\n')[0] as string;

/** Runs the command until `until` holds, then aborts it; returns its exit code and output. */
async function runUntil(
  argv: string[],
  env: Record<string, string>,
  until: (err: string) => boolean | Promise<boolean>,
  act?: (err: string) => Promise<void>,
) {
  const captured = io(env);
  const stop = new AbortController();
  const exit = relayCommand(argv, captured, stop.signal);
  await waitFor(() => /"message":"relay started"/.test(captured.err), 3000, 'the relay to start');
  await act?.(captured.err);
  await waitFor(() => until(captured.err), 3000, 'the relay to deliver');
  stop.abort();
  return { code: await exit, err: captured.err };
}

const listenAddress = (err: string): string => {
  const line = err.split('\n').find((l) => l.includes('"address"'));
  return (JSON.parse(line as string) as { address: string }).address;
};

describe('vault-rollout relay (CLI)', () => {
  it('is registered in main and explained in the usage', async () => {
    const captured = io();
    expect(await main(['relay'], captured)).toBe(64);
    expect(captured.err).toMatch(/give at least one source/);
    const help = io();
    await main(['--help'], help);
    expect(help.out).toMatch(/relay +Ship Vault's change feed/);
  });

  it.each([
    [['--audit-file', 'a.log'], /--to is required/],
    [['--audit-file', 'a.log', '--to', 'not a url'], /is not a URL/],
    [['--audit-file', 'a.log', '--to', 'ftp://x'], /http\(s\) URL/],
    [['--audit-listen', 'udp://x:1', '--to', 'http://127.0.0.1:1'], /tcp:\/\/HOST:PORT/],
    [
      ['--events', 'database/*', '--vault-addr', 'http://127.0.0.1:8200', '--to', 'http://127.0.0.1:1'],
      /KV event types/,
    ],
    [['--events', 'kv-v2/*', '--to', 'http://127.0.0.1:1'], /--vault-addr/],
    [['--audit-file', 'a.log', '--to', 'https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo'], /--routes FILE/],
    [
      ['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--grace-seconds', '10'],
      /--grace-seconds is no longer accepted: use --grace DURATION/,
    ],
    [['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--grace', '10'], /--grace 10: use a unit: 10s/],
    [
      ['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--batch-wait-ms', '200'],
      /--batch-wait-ms is no longer accepted: use --batch-wait DURATION/,
    ],
    [
      ['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--batch-wait', '2m'],
      /--batch-wait 2m: 2m is out of range: from 0s to 1m/,
    ],
    [
      ['--events', 'kv-v2/*', '--namespaces', 'a,b', '--to', 'http://127.0.0.1:1'],
      /--namespaces is no longer accepted: use --vault-namespace/,
    ],
    [['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--spool-max-mb', '0'], /--spool-max-mb/],
    [['--nope'], /unknown option "--nope"\nRun "vault-rollout relay --help" for usage/],
  ])('usage error for %j', async (argv, message) => {
    const captured = io({ VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET });
    expect(await relayCommand(argv, captured)).toBe(64);
    expect(captured.err).toMatch(message);
  });

  it('refuses to start without a signing secret, or events without a Vault token', async () => {
    const noSecret = io();
    expect(await relayCommand(['--audit-file', 'a.log', '--to', 'http://127.0.0.1:1'], noSecret)).toBe(1);
    expect(noSecret.err).toMatch(/VAULT_ROLLOUT_WEBHOOK_SECRET/);
    const noToken = io({ VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET });
    expect(
      await relayCommand(
        ['--events', 'kv-v2/*', '--vault-addr', 'http://127.0.0.1:8200', '--to', 'http://127.0.0.1:1'],
        noToken,
      ),
    ).toBe(1);
    expect(noToken.err).toMatch(
      /no Vault authentication configured: set VAULT_TOKEN .* VAULT_ROLE_ID \+ VAULT_SECRET_ID .* VAULT_K8S_ROLE \(Kubernetes\)/,
    );
  });

  it('fails to start (exit 1) when it cannot listen', async () => {
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const captured = io({ VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET });
    expect(
      await relayCommand(
        [
          '--audit-listen',
          'unix:///nonexistent-vault-rollout-dir/audit.sock',
          '--to',
          'http://127.0.0.1:1',
          '--spool',
          tmp.dir,
        ],
        captured,
      ),
    ).toBe(1);
    expect(captured.err).toMatch(/cannot start/);
  });

  it('runs: prints the bound address, delivers signed batches to the function, and exits 0 on abort', async () => {
    const fn = await startFunctionServer();
    cleanups.push(() => fn.close());
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const { code, err } = await runUntil(
      ['--audit-listen', 'tcp://127.0.0.1:0', '--to', fn.url, '--spool', tmp.dir, '--grace', '1s'],
      { VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET, VAULT_ROLLOUT_WEBHOOK_TOKEN: 'bearer' },
      () => fn.requests.length === 1,
      (e) => sendLines(listenAddress(e), [demoLine]),
    );
    expect(code).toBe(0);
    expect(listenAddress(err)).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(fn.requests[0]?.auth).toEqual({ ok: true, method: 'hmac' });
    expect(err).toMatch(/"message":"relay stopped"/);
    expect(err).not.toContain(SECRET);
    expect(err).not.toContain('payments/api/db'); // record contents stay out of the logs
  });

  it('--metrics-port: GET /metrics on loopback with the records by stage, the spool and the delivery lag', async () => {
    const fn = await startFunctionServer();
    cleanups.push(() => fn.close());
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    let scraped = '';
    const metricsUrl = (err: string) => /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(err)?.[1] ?? '';
    const { code, err } = await runUntil(
      [
        '--audit-listen',
        'tcp://127.0.0.1:0',
        '--to',
        fn.url,
        '--spool',
        tmp.dir,
        '--grace',
        '1s',
        '--metrics-port',
        '0',
      ],
      { VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET },
      async (e) => {
        if (fn.requests.length !== 1) return false;
        scraped = await (await fetch(metricsUrl(e))).text();
        return /vault_rollout_relay_records_total\{stage="delivered"\} 1\n/.test(scraped);
      },
      (e) => sendLines(listenAddress(e), [demoLine]),
    );
    expect(code).toBe(0);
    expect(metricsUrl(err)).not.toBe('');
    expect(scraped).toMatch(/vault_rollout_relay_records_total\{stage="received"\} 1\n/);
    expect(scraped).toMatch(/vault_rollout_relay_spool_bytes \d+\n/);
    expect(scraped).toMatch(/vault_rollout_relay_delivery_lag_seconds 0\n/);
    expect(scraped).not.toContain('payments');
    expect(scraped).not.toContain(SECRET);
  });

  it('--metrics-port refuses a port that is not one', async () => {
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const captured = io({ VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET });
    expect(
      await relayCommand(
        [
          '--audit-listen',
          'tcp://127.0.0.1:0',
          '--to',
          'http://127.0.0.1:1',
          '--spool',
          tmp.dir,
          '--metrics-port',
          'x',
        ],
        captured,
      ),
    ).toBe(64);
    expect(captured.err).toMatch(/--metrics-port x: not a whole number: x \(from 0 to 65535\)/);
  });

  it('with an SQS queue URL, plans locally with --routes and queues on SQS (endpoint from AWS_ENDPOINT_URL_SQS)', async () => {
    const sent: Array<{ MessageGroupId: string; MessageBody: string }> = [];
    const sqs = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const input = JSON.parse(body) as {
          QueueUrl: string;
          Entries: Array<{ Id: string; MessageBody: string; MessageGroupId: string }>;
        };
        expect(req.headers['x-amz-target']).toBe('AmazonSQS.SendMessageBatch');
        sent.push(...input.Entries);
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
        res.end(
          JSON.stringify({
            Successful: input.Entries.map((e) => ({
              Id: e.Id,
              MessageId: `id-${e.Id}`,
              MD5OfMessageBody: createHash('md5').update(e.MessageBody).digest('hex'),
            })),
            Failed: [],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => sqs.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => sqs.close(() => resolve())));
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'test');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test');
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const queueUrl = 'https://sqs.eu-west-1.amazonaws.com/000000000000/vault-rollout.fifo';
    const { code } = await runUntil(
      [
        '--audit-listen',
        'tcp://127.0.0.1:0',
        '--to',
        queueUrl,
        '--routes',
        `${repoRoot}infra/routes/example.yaml`,
        '--spool',
        tmp.dir,
      ],
      { AWS_ENDPOINT_URL_SQS: `http://127.0.0.1:${(sqs.address() as AddressInfo).port}` },
      () => sent.length === 2,
      (e) => sendLines(listenAddress(e), [demoLine]),
    );
    expect(code).toBe(0);
    expect(sent.map((m) => m.MessageGroupId).sort()).toEqual(['alpha', 'beta']);
    // The queue carries the change, never a target: the worker plans it again with its own table.
    const message = JSON.parse(sent[0]?.MessageBody as string);
    expect(message).toMatchObject({ v: 2, changes: [{ mount: 'secret', key: 'payments/api/db', operation: 'write' }] });
    expect(message).not.toHaveProperty('targets');
  });

  it("--to-auth iam: signs each batch with SigV4 (service lambda) from the host's AWS credentials, checked by an independent verifier", async () => {
    const { verifySignedRequest } = await import('../aws/sigv4-reference.ts');
    const checks: Array<ReturnType<typeof verifySignedRequest>> = [];
    const fn = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const check = verifySignedRequest(
          { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) },
          (id) => (id === 'AKIDRELAYTEST' ? 'relay/test+secret/EXAMPLE' : undefined),
          Date.now(),
        );
        checks.push(check);
        // Tampering is caught: the same headers over another body do not verify.
        checks.push(
          verifySignedRequest(
            { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.from('{"forged":1}') },
            () => 'relay/test+secret/EXAMPLE',
            Date.now(),
          ),
        );
        res.writeHead(check.ok ? 202 : 403, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(check.ok ? { accepted: 1, ignored: 0, rejected: 0, queued: 1 } : { message: 'Forbidden' }),
        );
      });
    });
    await new Promise<void>((resolve) => fn.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => fn.close(() => resolve())));
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDRELAYTEST');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'relay/test+secret/EXAMPLE');
    vi.stubEnv('AWS_SESSION_TOKEN', 'relay-test-session-token');
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const { code, err } = await runUntil(
      [
        '--audit-listen',
        `unix://${tmp.dir}/audit.sock`,
        '--to',
        `http://127.0.0.1:${(fn.address() as AddressInfo).port}/v1/vault/audit`,
        '--to-auth',
        'iam',
        '--spool',
        `${tmp.dir}/spool`,
        '--grace',
        '1s',
      ],
      { AWS_REGION: 'eu-west-1' },
      () => checks.length >= 2,
      (e) => sendLines(listenAddress(e), [demoLine]),
    );
    expect(code).toBe(0);
    expect(checks[0]).toEqual({
      ok: true,
      detail: expect.stringMatching(/^\d{8}\/eu-west-1\/lambda\/aws4_request$/),
      accessKeyId: 'AKIDRELAYTEST',
      region: 'eu-west-1',
      service: 'lambda',
    });
    expect(checks[1]).toMatchObject({ ok: false });
    expect(err).not.toContain('relay/test+secret/EXAMPLE');
    expect(err).not.toContain('relay-test-session-token');
  });

  it.each([
    ['abc123def456.lambda-url.eu-west-1.on.aws', 'eu-west-1'],
    ['ABC123.lambda-url.us-gov-west-1.on.aws', 'us-gov-west-1'],
    ['abc.lambda-url.eu-west-1.on.aws.evil.example', undefined],
    ['api.example.com', undefined],
  ])('reads the region of a Function URL host: %s -> %s', async (host, region) => {
    const { functionUrlRegion } = await import('../../../lib/aws/sigv4-signer.ts');
    expect(functionUrlRegion(host)).toBe(region);
  });

  it.each([
    [['--to-auth', 'iam'], { VAULT_ROLLOUT_WEBHOOK_TOKEN: 'b' }, /unset VAULT_ROLLOUT_WEBHOOK_TOKEN/],
    [['--to-auth', 'iam'], {}, /set AWS_REGION/],
    [['--to-auth', 'sigv4'], {}, /--to-auth sigv4: one of auto, app, iam/],
    [[], {}, /or --to-auth iam for a Function URL with AWS_IAM/],
  ])('--to-auth refuses %j with %j', async (extra, env, message) => {
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const captured = io(env as Record<string, string>);
    const code = await relayCommand(
      ['--audit-listen', `unix://${tmp.dir}/a.sock`, '--to', 'https://api.example.com', '--spool', tmp.dir, ...extra],
      captured,
    );
    expect(code).not.toBe(0);
    expect(captured.err).toMatch(message);
  });

  it('follows an audit file and subscribes to events with an AppRole login', async () => {
    const { startFakeVault, kvEvent } = await import('./fake-vault.ts');
    const vault = await startFakeVault({
      tokens: new Set(['approle-token']),
      api: (req) =>
        req.url === '/v1/auth/approle/login'
          ? { status: 200, body: { auth: { client_token: 'approle-token', lease_duration: 3600, renewable: true } } }
          : { status: 404 },
    });
    cleanups.push(() => vault.close());
    const fn = await startFunctionServer();
    cleanups.push(() => fn.close());
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const { writeFileSync, appendFileSync } = await import('node:fs');
    const auditFile = `${tmp.dir}/audit.log`;
    writeFileSync(auditFile, `${demoLine}\n`);
    const { code } = await runUntil(
      [
        '--audit-file',
        auditFile,
        '--from-start',
        '--events',
        'kv-v2/*',
        '--vault-addr',
        vault.url,
        '--vault-namespace',
        'a,b',
        '--to',
        fn.url,
        '--spool',
        `${tmp.dir}/spool`,
      ],
      { VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET, VAULT_ROLE_ID: 'r', VAULT_SECRET_ID: 's' },
      () =>
        fn.requests.some((r) => r.path === '/v1/vault/events') && fn.requests.some((r) => r.path === '/v1/vault/audit'),
      async () => {
        await waitFor(() => vault.sockets.length === 1);
        vault.sockets[0]?.send(kvEvent(1));
        appendFileSync(auditFile, `${demoLine}\n`);
      },
    );
    expect(code).toBe(0);
    expect(vault.upgrades[0]?.url).toBe('/v1/sys/events/subscribe/kv-v2/*?json=true&namespaces=a&namespaces=b');
  });
});
