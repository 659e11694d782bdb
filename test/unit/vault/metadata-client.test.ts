/**
 * A metadata read made for a change that came from an event sends the event's `vault_index` as
 * `X-Vault-Index` (Vault Enterprise: a performance standby that has not applied that index answers 412, retried,
 * instead of an older version — docs: enterprise/consistency, "Retry stale requests"); without one, no such header.
 * `X-Vault-Inconsistent` is never sent. A real local HTTP server stands in for Vault and records every request.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';
import { staticTokenSource } from '../../../lib/vault/vault-auth.ts';
import { VaultMetadataClient } from '../../../lib/vault/metadata-client.ts';
import { VaultRequestError } from '../../../lib/vault/vault-request.ts';
import { repoRoot, vaultSamples } from '../../helpers.ts';
import { startFakeVault, type FakeVault } from '../relay/fake-vault.ts';
import { fastSleep } from '../relay/helpers.ts';

const closing: FakeVault[] = [];
afterEach(async () => {
  for (const v of closing.splice(0)) await v.close();
});

const METADATA = { data: { current_version: 7, versions: { 7: { created_time: '2026-10-14T09:12:03.551872Z' } } } };
const INDEX =
  'djE6MDAwYjdlMWMtZmU2Yy05NWU1LTExYzMtOGIzNjJmZjRmNDg3Ojc0NDkwNTo3NDQ5MDU6N2Q4NGFhN2NmYzc5ZWMzMjEzOGMxYTc4ZDI1YzdjYTMxN2IxOWFmZTA3NjFiZWYyMzA5NDFjOTA4Zjk4YzM0Mw==';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingHttpHeaders;
}

/** A Vault recording each request; `answer` picks the reply from the request's place in the sequence. */
async function recordingVault(
  answer: (n: number, url: string) => { status: number; body?: unknown; headers?: Record<string, string> } = () => ({
    status: 200,
    body: METADATA,
  }),
) {
  const seen: Seen[] = [];
  const vault = await startFakeVault({
    api: (req) => {
      seen.push({ method: req.method, url: req.url, headers: req.headers });
      return answer(seen.length, req.url ?? '');
    },
  });
  closing.push(vault);
  return { vault, seen };
}

const client = (vaultAddr: string, extra: Partial<ConstructorParameters<typeof VaultMetadataClient>[0]> = {}) =>
  new VaultMetadataClient({ vaultAddr, auth: staticTokenSource('t'), sleep: fastSleep().sleep, ...extra });

/** The change a record becomes, then its metadata read as a caller would make it: with the change's index, if any. */
async function readAfter(record: string, vaultAddr: string) {
  const change = parseInput(record, { mounts: new Map([['secret', 2]]) }).changes[0];
  if (!change) throw new Error('the record is no change');
  return client(vaultAddr).readMetadata(change.mount, change.key, {
    namespace: change.namespace,
    ...(change.vaultIndex === undefined ? {} : { vaultIndex: change.vaultIndex }),
  });
}

describe('X-Vault-Index on metadata reads', () => {
  it.each<[string, string, string | undefined]>([
    ['an event with vault_index (the docs example, current shape)', `${vaultSamples}event-kvv2-data-write.json`, INDEX],
    ['a 1.15 event (no vault_index)', `${repoRoot}test/events/event-1.15/kvv2-data-write.json`, undefined],
    [
      'an event whose vault_index is no bounded base64',
      `${repoRoot}test/events/event-1.21/kvv2-vault-index-malformed.ndjson`,
      undefined,
    ],
    ['an audit entry', `${vaultSamples}audit-response-kvv2-update.json`, undefined],
  ])('the read made for %s', async (_what, file, header) => {
    const { vault, seen } = await recordingVault();
    expect((await readAfter(readFileSync(file, 'utf8').split('\n')[0] ?? '', vault.url))?.currentVersion).toBe(7);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.url).toMatch(/^\/v1\/[a-z/]+\/metadata\//);
    expect(seen[0]?.headers['x-vault-index']).toBe(header);
    expect(seen[0]?.headers).not.toHaveProperty('x-vault-inconsistent');
  });

  it('no vaultIndex, no header', async () => {
    const { vault, seen } = await recordingVault();
    await client(vault.url).readMetadata('secret', 'web/db');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers).not.toHaveProperty('x-vault-index');
  });

  // Node's HTTP server refuses the LIST method (400), so lists are watched at fetch.
  it.each([
    ['with a vaultIndex: sent', INDEX, INDEX],
    ['without: none', undefined, undefined],
  ])('a list %s', async (_what, index, header) => {
    const sent: Array<Record<string, string>> = [];
    const fetch = (_url: string | URL | Request, init?: RequestInit) => {
      sent.push({ ...(init?.headers as Record<string, string>), method: String(init?.method) });
      return Promise.resolve(new Response(JSON.stringify({ data: { keys: ['db'] } }), { status: 200 }));
    };
    const listing = await client('http://vault.invalid:8200', { fetch: fetch as typeof globalThis.fetch }).listMetadata(
      'secret',
      'web',
      index === undefined ? {} : { vaultIndex: index },
    );
    expect(listing.keys).toEqual(['db']);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.method).toBe('LIST');
    expect(sent[0]?.['x-vault-index']).toBe(header);
  });

  it('a standby not yet at the index answers 412: retried, with the index again, until it answers', async () => {
    const { vault, seen } = await recordingVault((n) =>
      n < 3 ? { status: 412, body: { errors: ['required index state not present'] } } : { status: 200, body: METADATA },
    );
    const sleep = fastSleep();
    const m = await client(vault.url, { sleep: sleep.sleep }).readMetadata('secret', 'web/db', { vaultIndex: INDEX });
    expect(m?.currentVersion).toBe(7);
    expect(seen.map((s) => s.headers['x-vault-index'])).toEqual([INDEX, INDEX, INDEX]);
    expect(sleep.asked).toHaveLength(2);
  });

  it('a standby still behind after every attempt: the read fails (HTTP 412), it is never answered stale', async () => {
    const { vault, seen } = await recordingVault(() => ({
      status: 412,
      body: { errors: ['required index state not present'] },
    }));
    await expect(
      client(vault.url, { maxAttempts: 3 }).readMetadata('secret', 'web/db', { vaultIndex: INDEX }),
    ).rejects.toMatchObject({ status: 412 });
    expect(seen).toHaveLength(3);
  });

  it("follows a standby's 307 to the active node with the index", async () => {
    const { vault: active, seen: activeSeen } = await recordingVault();
    const { vault: standby } = await recordingVault((_n, url) => ({
      status: 307,
      headers: { location: `${active.url}${url}` },
    }));
    await client(standby.url).readMetadata('secret', 'web/db', { vaultIndex: INDEX });
    expect(activeSeen.map((s) => s.headers['x-vault-index'])).toEqual([INDEX]);
  });

  it.each([
    ['a header break', `${INDEX.slice(0, 8)}\r\nX-Vault-Inconsistent: forward-active-node`],
    ['an empty index', ''],
    ['longer than 512 characters', 'A'.repeat(516)],
    ['not base64', 'v1:cluster:1:1:ff'],
  ])('a vaultIndex that is %s is refused before any request', async (_what, index) => {
    const { vault, seen } = await recordingVault();
    const c = client(vault.url);
    await expect(c.readMetadata('secret', 'web/db', { vaultIndex: index })).rejects.toBeInstanceOf(VaultRequestError);
    expect(seen).toEqual([]);
    expect(c.requests).toBe(0);
  });
});
