// Records real payloads from the dev servers into test/vault/captured/<kind>-<version>/,
// as test vectors for the parsers in lib/sources:
//
//   node test/vault/capture.ts [openbao] [vault]      (default: both)
//
// Every value written is a dummy; audit entries HMAC them anyway. The root token never
// appears (audit entries carry its HMAC only) and the server logs are not saved.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { startHttpReceiver } from './http-receiver.ts';
import { readAuditFile, sleep, startDevServer, type ServerKind } from './server.ts';

type Entry = { type?: string; request?: { path?: string; operation?: string } };

const HERE = import.meta.dirname;

async function capture(kind: ServerKind): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), `vault-rollout-capture-${kind}-`));
  const auditFile = join(work, 'audit.log');
  const receiver = kind === 'openbao' ? await startHttpReceiver() : undefined;
  const server = await startDevServer({
    kind,
    auditFile,
    audit: receiver
      ? [
          {
            type: 'http',
            path: 'http',
            options: {
              uri: `${receiver.url}/ingest`,
              headers: JSON.stringify({ Authorization: ['Bearer capture-bearer'] }),
            },
          },
        ]
      : [],
  });
  const out = join(HERE, 'captured', `${kind}-${server.version}`);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const c = server.client;
  try {
    // Community Vault has the event WebSocket in 1.13-1.15 only (Enterprise since 1.16; OpenBao removed it).
    const [major = 0, minor = 0] = server.version.split('.').map(Number);
    const subscription = kind === 'vault' && major === 1 && minor <= 15 ? await c.subscribeEvents('kv*') : undefined;
    await c.enableKv('secret2', 2);
    await c.enableKv('legacy', 1);
    await c.kv2Write('secret2', 'payments/api/db', { password: 'dummy-1' });
    await c.kv2Write('secret2', 'payments/api/db', { password: 'dummy-2' });
    await c.kv2Patch('secret2', 'payments/api/db', { user: 'dummy' });
    await c.kv2Read('secret2', 'payments/api/db');
    // What reconcile and status read (metadata only, never data/): the response as the server sends it.
    const metadata = await c.get('secret2/metadata/payments/api/db');
    await c.kv2Delete('secret2', 'payments/api/db');
    await c.kv2Undelete('secret2', 'payments/api/db', [3]);
    await c.kv2DeleteVersions('secret2', 'payments/api/db', [2]);
    await c.kv2Destroy('secret2', 'payments/api/db', [1]);
    await c.kv2MetadataWrite('secret2', 'payments/api/db', { max_versions: 5 });
    await c.kv2MetadataDelete('secret2', 'payments/api/db');
    await c.kv1Write('legacy', 'app/token', { token: 'dummy-1' });
    await c.kv1Write('legacy', 'app/token', { token: 'dummy-2' });
    await c.kv1Delete('legacy', 'app/token');
    await sleep(500);
    const entries = readAuditFile(auditFile) as Entry[];
    const pick = (path: string, operation: string, type = 'response', nth = 0): Entry => {
      const found = entries.filter(
        (e) => e.type === type && e.request?.path === path && e.request.operation === operation,
      );
      const entry = found[nth];
      if (!entry) throw new Error(`no ${type} entry for ${operation} ${path}`);
      return entry;
    };
    const save = (name: string, value: unknown): void =>
      writeFileSync(join(out, name), `${JSON.stringify(value, null, 2)}\n`);
    save('kv2-metadata-read.json', { ...metadata, request_id: '<per request>' });
    // sys/audit-hash: how an operator matches a known value with the HMAC in an audit entry (vault-rollout never calls it).
    save('sys-audit-hash-response.json', {
      ...(await c.post('sys/audit-hash/file', { input: 'dummy-1' })),
      request_id: '<per request>',
    });
    save('audit-kv2-write-request.json', pick('secret2/data/payments/api/db', 'create', 'request'));
    save('audit-kv2-write-response.json', pick('secret2/data/payments/api/db', 'create'));
    save('audit-kv2-update-response.json', pick('secret2/data/payments/api/db', 'update'));
    save('audit-kv2-patch-response.json', pick('secret2/data/payments/api/db', 'patch'));
    save('audit-kv2-read-response.json', pick('secret2/data/payments/api/db', 'read'));
    save('audit-kv2-delete-response.json', pick('secret2/data/payments/api/db', 'delete'));
    save('audit-kv2-undelete-response.json', pick('secret2/undelete/payments/api/db', 'update'));
    save('audit-kv2-delete-versions-response.json', pick('secret2/delete/payments/api/db', 'update'));
    save('audit-kv2-destroy-response.json', pick('secret2/destroy/payments/api/db', 'update'));
    save('audit-kv2-metadata-write-response.json', pick('secret2/metadata/payments/api/db', 'update'));
    save('audit-kv2-metadata-delete-response.json', pick('secret2/metadata/payments/api/db', 'delete'));
    save('audit-kv1-write-response.json', pick('legacy/app/token', 'create'));
    save('audit-kv1-update-response.json', pick('legacy/app/token', 'update'));
    save('audit-kv1-delete-response.json', pick('legacy/app/token', 'delete'));
    // The whole file, as the file device wrote it (JSON lines).
    writeFileSync(join(out, 'audit-file.ndjson'), readFileSync(auditFile, 'utf8'));
    if (receiver) {
      const posts = receiver.requests.map((r) => ({ method: r.method, url: r.url, headers: r.headers, body: r.body }));
      save('http-audit-posts.json', posts);
    }
    if (subscription) {
      await subscription.waitFor((e) => (e.data as { event_type?: string }).event_type === 'kv-v1/delete');
      writeFileSync(join(out, 'events.ndjson'), subscription.raw.map((r) => `${r.trim()}\n`).join(''));
      const byType = (t: string) =>
        subscription.events.find((e) => (e.data as { event_type?: string }).event_type === t);
      save('event-kv2-data-write.json', byType('kv-v2/data-write'));
      save('event-kv1-write.json', byType('kv-v1/write'));
      save('event-kv2-data-delete.json', byType('kv-v2/data-delete'));
      save('event-kv2-delete.json', byType('kv-v2/delete'));
      save('event-kv2-destroy.json', byType('kv-v2/destroy'));
      save('event-kv2-undelete.json', byType('kv-v2/undelete'));
      save('event-kv2-metadata-delete.json', byType('kv-v2/metadata-delete'));
      save('event-kv1-delete.json', byType('kv-v1/delete'));
      await subscription.close();
    }
    console.log(`captured ${kind} ${server.version} into ${out}`);
  } finally {
    await server.stop();
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  }
}

const kinds = (process.argv.slice(2) as ServerKind[]).filter((k) => k === 'openbao' || k === 'vault');
for (const kind of kinds.length > 0 ? kinds : (['openbao', 'vault'] as const)) await capture(kind);
