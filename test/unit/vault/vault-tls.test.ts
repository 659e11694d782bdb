/** TLS to Vault from the vault CLI's variables, against a real https server with its own CA. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert, writeCa } from '../../clusters/pki.ts';
import { vaultRequest } from '../../../lib/vault/vault-request.ts';
import { tlsFetch, vaultTlsFromEnv } from '../../../lib/vault/vault-tls.ts';

let dir: string;
let server: Server;
let addr: string;
let clientCn: string | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vr-vault-tls-'));
  const ca = writeCa(dir, 'test-vault-ca');
  const serving = issueCert(dir, ca, { name: 'vault', commonName: 'vault', sans: ['IP:127.0.0.1'], usage: 'server' });
  const clientCa = writeCa(dir, 'test-client-ca', 'client-ca');
  issueCert(dir, clientCa, { name: 'client', commonName: 'vault-rollout-client', usage: 'client' });
  server = createServer(
    {
      cert: readFileSync(serving.certFile),
      key: readFileSync(serving.keyFile),
      ca: readFileSync(clientCa.certFile),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      clientCn = (req.socket as TLSSocket).authorized ? String(peer.subject?.CN) : undefined;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ data: { path: req.url } }));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  addr = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

const warnings: string[] = [];
const deps = {
  readFile: (p: string) => readFile(p, 'utf8'),
  readDir: (d: string) => readdir(d),
  log: { warn: (m: string) => void warnings.push(m) },
};
const get = async (env: Record<string, string>) => {
  const tls = await vaultTlsFromEnv(env, deps);
  return vaultRequest({ vaultAddr: addr, method: 'GET', path: 'sys/health', ...(tls ? { fetch: tlsFetch(tls) } : {}) });
};

describe('TLS to Vault from the environment', () => {
  it("asks for nothing without the variables (Node's CAs), so a private CA is refused", async () => {
    expect(await vaultTlsFromEnv({}, deps)).toBeUndefined();
    await expect(get({})).rejects.toThrow(/sys\/health: fetch failed/);
  });

  it('trusts VAULT_CACERT', async () => {
    const answer = await get({ VAULT_CACERT: join(dir, 'ca.crt') });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ data: { path: '/v1/sys/health' } });
  });

  it('trusts the .pem/.crt files of VAULT_CAPATH', async () => {
    const capath = mkdtempSync(join(tmpdir(), 'vr-capath-'));
    await import('node:fs').then((fs) => fs.copyFileSync(join(dir, 'ca.crt'), join(capath, 'vault-ca.pem')));
    expect((await get({ VAULT_CAPATH: capath })).status).toBe(200);
    rmSync(capath, { recursive: true });
  });

  it('presents VAULT_CLIENT_CERT and VAULT_CLIENT_KEY', async () => {
    clientCn = undefined;
    await get({
      VAULT_CACERT: join(dir, 'ca.crt'),
      VAULT_CLIENT_CERT: join(dir, 'client.crt'),
      VAULT_CLIENT_KEY: join(dir, 'client.key'),
    });
    expect(clientCn).toBe('vault-rollout-client');
  });

  it('skips verification with VAULT_SKIP_VERIFY, warning loudly', async () => {
    warnings.length = 0;
    expect((await get({ VAULT_SKIP_VERIFY: 'true' })).status).toBe(200);
    expect(warnings).toEqual([
      expect.stringMatching(/^VAULT_SKIP_VERIFY is set: the Vault server's certificate is NOT verified/),
    ]);
  });

  it.each([
    [{ VAULT_CACERT: '/nowhere/ca.pem' }, 'VAULT_CACERT: cannot read /nowhere/ca.pem (ENOENT)'],
    [{ VAULT_CLIENT_CERT: '/x.crt' }, 'VAULT_CLIENT_CERT and VAULT_CLIENT_KEY go together: set both, or neither'],
  ])('refuses %j with the variable named', async (env, message) => {
    await expect(vaultTlsFromEnv(env, deps)).rejects.toThrow(message);
  });
});
