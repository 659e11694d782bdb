/** `vault-rollout worker --metrics-port`: the scrape listener beside the SQS consumer, on loopback by default. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CliIo } from '../../../lib/cli/io.ts';
import { workerCommand } from '../../../lib/cli/worker-command.ts';
import { repoRoot } from '../../helpers.ts';

function io(env: Record<string, string> = {}): CliIo & { err: string } {
  const captured = {
    out: '',
    err: '',
    env,
    stdout: () => {},
    stderr: (t: string) => void (captured.err += t),
    readText: (f: string) => readFile(f, 'utf8'),
    openInput: () => {
      throw new Error('not used');
    },
  };
  return captured;
}
const routes = `${repoRoot}infra/routes/example.yaml`;
const queueUrl = 'https://sqs.eu-west-1.amazonaws.com/000000000000/vault-rollout.fifo';

afterEach(() => vi.unstubAllEnvs());

describe('vault-rollout worker --metrics-port', () => {
  it('refuses a port that is not one', async () => {
    const captured = io();
    expect(
      await workerCommand(['--routes', routes, '--queue-url', queueUrl, '--metrics-port', '99999'], captured),
    ).toBe(64);
    expect(captured.err).toMatch(/--metrics-port 99999: 99999 is out of range: from 0 to 65535/);
  });

  it('serves GET /metrics on 127.0.0.1 while it polls, and stops with the worker', async () => {
    // An SQS endpoint with nothing to receive.
    const sqs = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        setTimeout(() => res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' }).end('{}'), 50),
      );
    });
    await new Promise<void>((resolve) => sqs.listen(0, '127.0.0.1', resolve));
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'test');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test');
    vi.stubEnv('AWS_ENDPOINT_URL_SQS', `http://127.0.0.1:${(sqs.address() as AddressInfo).port}`);
    const captured = io({ AWS_REGION: 'eu-west-1', VAULT_ROLLOUT_STATE_DB: ':memory:' });
    const stop = new AbortController();
    const exit = workerCommand(
      ['--routes', routes, '--queue-url', queueUrl, '--metrics-port', '0'],
      captured,
      stop.signal,
    );
    try {
      let url = '';
      for (let i = 0; i < 100 && url === ''; i++) {
        url = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(captured.err)?.[1] ?? '';
        if (url === '') await new Promise((r) => setTimeout(r, 50));
      }
      expect(url).not.toBe('');
      const res = await fetch(url);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('# TYPE vault_rollout_targets_total counter');
      expect(text).toContain('# TYPE vault_rollout_kube_request_duration_seconds histogram');
      expect(text).toMatch(/vault_rollout_process_resident_memory_bytes \d+/);
      stop.abort();
      expect(await exit).toBe(0);
      await expect(fetch(url)).rejects.toThrow();
    } finally {
      stop.abort();
      await new Promise((resolve) => sqs.close(resolve));
    }
  });
});
