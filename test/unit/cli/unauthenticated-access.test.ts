/**
 * Unauthenticated listeners stay on this machine unless said twice: `serve --insecure-no-auth` on a non-loopback
 * --host and `relay --audit-listen tcp://` on a non-loopback address refuse to start without
 * --i-understand-unauthenticated-access. Non-loopback rows use addresses that nothing is bound to (TEST-NET-1,
 * 192.0.2.1) or that the refusal stops before binding, so no test opens a port beyond loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { relayCommand } from '../../../lib/cli/relay-command.ts';
import { serveCommand } from '../../../lib/cli/serve-command.ts';
import { isLoopbackHost } from '../../../lib/cli/shared.ts';
import { memoryIo, readRepoFile } from '../../helpers.ts';
import { WEBHOOK_SECRET } from '../../secrets.ts';

const FLAG = '--i-understand-unauthenticated-access';
const routes = { 'routes.yaml': readRepoFile('infra/routes/example.yaml') };
const spool = mkdtempSync(join(tmpdir(), 'vr-unauth-'));
afterAll(() => rmSync(spool, { recursive: true, force: true }));

describe('isLoopbackHost', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.255.255.254', true],
    ['localhost', true],
    ['LOCALHOST', true],
    ['::1', true],
    ['[::1]', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['10.0.0.1', false],
    ['128.0.0.1', false],
    ['192.0.2.1', false],
    ['localhost.example.com', false],
    ['127.0.0.1.nip.io', false],
    ['', false],
  ])('%j → %s', (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
  });
});

describe('serve --insecure-no-auth', () => {
  it.each(['0.0.0.0', '::', '192.0.2.1'])('on --host %s refuses to start without the flag, naming it', async (host) => {
    const io = memoryIo(routes);
    expect(
      await serveCommand(
        ['--routes', 'routes.yaml', '--dry-run', '--port', '0', '--insecure-no-auth', '--host', host],
        io,
      ),
    ).toBe(1);
    expect(io.err).toBe(
      `vault-rollout serve: --insecure-no-auth on --host ${host} would let anyone who reaches it restart workloads: listen on 127.0.0.1 (the default), set VAULT_ROLLOUT_WEBHOOK_SECRET or VAULT_ROLLOUT_WEBHOOK_TOKEN, or add ${FLAG}\n`,
    );
  });

  it('with the flag goes on to listen (here on an address no interface has, so it stops there)', async () => {
    const io = memoryIo(routes);
    expect(
      await serveCommand(
        ['--routes', 'routes.yaml', '--dry-run', '--port', '0', '--insecure-no-auth', '--host', '192.0.2.1', FLAG],
        io,
      ),
    ).toBe(1);
    expect(io.err).toMatch(/cannot listen on 192\.0\.2\.1:0: no interface has this address/);
  });

  it('on a loopback host starts without the flag', async () => {
    const io = memoryIo(routes);
    const stop = new AbortController();
    const running = serveCommand(
      ['--routes', 'routes.yaml', '--dry-run', '--port', '0', '--insecure-no-auth', '--host', '127.0.0.2'],
      io,
      stop.signal,
    );
    for (let i = 0; i < 500 && !io.err.includes('listening on'); i++) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    expect(await running).toBe(0);
    expect(io.err).toMatch(/listening on http:\/\/127\.0\.0\.2:\d+ .*auth NONE \(--insecure-no-auth\)/);
  });

  it('with authentication configured needs no flag on any host (checked up to the listen)', async () => {
    const io = memoryIo(routes, { VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET });
    expect(await serveCommand(['--routes', 'routes.yaml', '--dry-run', '--port', '0', '--host', '192.0.2.1'], io)).toBe(
      1,
    );
    expect(io.err).toMatch(/no interface has this address/);
  });
});

describe('relay --audit-listen tcp://', () => {
  it.each(['tcp://0.0.0.0:0', 'tcp://[::]:0', 'tcp://192.0.2.1:1'])(
    '%s refuses to start without the flag, naming it',
    async (address) => {
      const io = memoryIo({}, { VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET });
      expect(await relayCommand(['--audit-listen', address, '--to', 'http://127.0.0.1:1', '--spool', spool], io)).toBe(
        1,
      );
      expect(io.err).toBe(
        `vault-rollout relay: --audit-listen ${address} would let anyone who reaches it inject audit entries that the relay signs and delivers: use unix:///PATH or a loopback address (127.0.0.1, ::1), or add ${FLAG}\n`,
      );
    },
  );

  it('with the flag goes on to listen (here on an address no interface has, so it cannot start)', async () => {
    const io = memoryIo({}, { VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET });
    expect(
      await relayCommand(
        ['--audit-listen', 'tcp://192.0.2.1:1', '--to', 'http://127.0.0.1:1', '--spool', spool, FLAG],
        io,
      ),
    ).toBe(1);
    expect(io.err).toMatch(/cannot start: listen EADDRNOTAVAIL/);
  });
});
