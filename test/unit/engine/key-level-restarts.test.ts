/**
 * Key-level restarts in the engine: a target whose keys did not change is skipped, its record moves to
 * the new version without a restart, and it is restarted as soon as a key it uses changes or it missed a version.
 */
import { describe, expect, it } from 'vitest';
import { executeRollouts } from '../../../lib/engine/rollout-executor.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { readRecord, recordedSkips } from '../../../lib/plan/restart-record.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: db
    match: { path: "secret/app/db" }
    targets:
      - { clusters: [a], namespace: ns, kind: Deployment, name: pw, keys: [password] }
      - { clusters: [a], namespace: ns, kind: Deployment, name: key, keys: [api_key] }
      - { clusters: [a], namespace: ns, kind: Deployment, name: all }
`);

const change = (version: number, changedKeys?: string[]): SecretChange =>
  kvWrite('app/db', version, {
    id: `id-${version}`,
    time: `2026-11-20T10:00:0${version}Z`,
    ...(changedKeys ? { changedKeys } : {}),
  });

const run = (fake: ReturnType<typeof fakeClusters>, changes: SecretChange[]) =>
  executeRollouts(table, planRollouts(table, changes).targets, options(fake.apiFor));
const outcomes = async (fake: ReturnType<typeof fakeClusters>, changes: SecretChange[]) =>
  (await run(fake, changes)).map((r) => [r.name, r.outcome, [r.reason, r.detail].filter(Boolean).join(': ')]);
const recorded = (fake: ReturnType<typeof fakeClusters>, name: string) =>
  readRecord(WORKLOAD_KINDS.Deployment, fake.store.get(`a/${name}`) as KubeObject);
const templatePatches = (fake: ReturnType<typeof fakeClusters>) =>
  fake.calls.filter((c) => c.op === 'patch' && Array.isArray(c.body)).map((c) => c.name);

describe('key-level restarts in the engine', () => {
  it('restarts exactly the targets whose keys changed; the others are skipped with the reason and recorded at the new version', async () => {
    const fake = fakeClusters({ a: ['pw', 'key', 'all'] });
    expect(await outcomes(fake, [change(1)])).toEqual([
      ['all', 'restarted', ''],
      ['key', 'restarted', ''],
      ['pw', 'restarted', ''],
    ]);
    fake.calls.length = 0;
    expect(await outcomes(fake, [change(2, ['password'])])).toEqual([
      ['all', 'restarted', ''],
      ['key', 'skipped', 'keys unchanged: keys api_key unchanged in v2'],
      ['pw', 'restarted', ''],
    ]);
    expect(templatePatches(fake).sort()).toEqual(['all', 'pw']);
    // No Event for a skip: only the two restarts created one.
    expect(fake.calls.filter((c) => c.op === 'create')).toHaveLength(2);
    // The skip is recorded as a skip, never as a version the pods run.
    expect(recorded(fake, 'key')['secret/app/db']).toBe(1);
    expect(recordedSkips(fake.store.get('a/key') as KubeObject)).toEqual({
      'secret/app/db': { v: 2, skipped: ['api_key'] },
    });
    // A replay finds the restarts recorded at v2 and the skip recorded: nothing is patched.
    fake.calls.length = 0;
    expect((await outcomes(fake, [change(2, ['password'])])).map((o) => o[1])).toEqual([
      'unchanged',
      'skipped',
      'unchanged',
    ]);
    expect(fake.calls.filter((c) => c.op === 'patch')).toEqual([]);
    // A write that changes nothing restarts none of the keyed targets.
    expect(await outcomes(fake, [change(3, [])])).toEqual([
      ['all', 'restarted', ''],
      ['key', 'skipped', 'keys unchanged: keys api_key unchanged in v3'],
      ['pw', 'skipped', 'keys unchanged: keys password unchanged in v3'],
    ]);
    // Every key (no comparison was possible): everything restarts.
    expect((await outcomes(fake, [change(4)])).map((o) => o[1])).toEqual(['restarted', 'restarted', 'restarted']);
  });

  it('a forged claim of unchanged keys swallows no real restart: the real write of that version that changed a used key restarts', async () => {
    // The reproduction of the security review: v2 restarted for real; a forged message for v3 naming a key the
    // workload does not use; then the real v3 write, which changed the password.
    const fake = fakeClusters({ a: ['pw'] });
    const pw = (changes: SecretChange[]) =>
      executeRollouts(
        table,
        planRollouts(table, changes).targets.filter((t) => t.type === 'workload' && t.name === 'pw'),
        options(fake.apiFor),
      );
    expect((await pw([change(2)])).map((r) => r.outcome)).toEqual(['restarted']);
    expect((await pw([change(3, ['api_key'])])).map((r) => [r.outcome, r.reason])).toEqual([
      ['skipped', 'keys unchanged'],
    ]);
    expect(recorded(fake, 'pw')['secret/app/db']).toBe(2);
    expect((await pw([change(3, ['password'])])).map((r) => [r.outcome, r.reason])).toEqual([['restarted', '']]);
    expect(recorded(fake, 'pw')['secret/app/db']).toBe(3);
  });

  it('a change of a skipped version that says nothing of its keys (an event) restarts; a chain of skips moves on', async () => {
    const fake = fakeClusters({ a: ['pw'] });
    const pw = (changes: SecretChange[]) =>
      executeRollouts(
        table,
        planRollouts(table, changes).targets.filter((t) => t.type === 'workload' && t.name === 'pw'),
        options(fake.apiFor),
      );
    await pw([change(1)]);
    expect((await pw([change(2, ['user'])])).map((r) => r.outcome)).toEqual(['skipped']);
    // v3 changes no used key either: the workload stands at v2 by its skip, so v3 is skipped too.
    expect((await pw([change(3, [])])).map((r) => r.outcome)).toEqual(['skipped']);
    expect(recordedSkips(fake.store.get('a/pw') as KubeObject)).toEqual({
      'secret/app/db': { v: 3, skipped: ['password'] },
    });
    expect((await pw([change(3)])).map((r) => r.outcome)).toEqual(['restarted']);
  });

  it('a target whose record is not at the version before is restarted whatever the keys (it missed a version)', async () => {
    const fake = fakeClusters({ a: ['pw', 'key', 'all'] });
    await run(fake, [change(1)]);
    expect(await outcomes(fake, [change(3, ['password'])])).toEqual([
      ['all', 'restarted', ''],
      ['key', 'restarted', ''],
      ['pw', 'restarted', ''],
    ]);
  });

  it('a dry run reports the skip and writes nothing', async () => {
    const fake = fakeClusters({ a: ['key'] });
    await run(fake, [change(1)]);
    fake.calls.length = 0;
    const results = await executeRollouts(
      table,
      planRollouts(table, [change(2, ['password'])]).targets.filter((t) => t.type === 'workload' && t.name === 'key'),
      options(fake.apiFor, { dryRun: true }),
    );
    expect(results.map((r) => [r.outcome, r.detail])).toEqual([['skipped', 'keys api_key unchanged in v2']]);
    expect(fake.calls.filter((c) => c.op === 'patch')).toEqual([]);
  });

  it('a workload target without keys: uses what its Vault Agent templates render of the path', async () => {
    const fake = fakeClusters({ a: ['pw', 'key', 'all'] });
    const o = fake.store.get('a/all') as KubeObject;
    o.spec = {
      template: {
        metadata: {
          annotations: {
            'vault.hashicorp.com/agent-inject-secret-db': 'secret/data/app/db',
            'vault.hashicorp.com/agent-inject-template-db':
              '{{ with secret "secret/data/app/db" }}{{ .Data.data.password }}{{ end }}',
          },
        },
      },
    };
    await run(fake, [change(1)]);
    expect((await outcomes(fake, [change(2, ['api_key'])]))[0]).toEqual([
      'all',
      'skipped',
      'keys unchanged: keys password unchanged in v2',
    ]);
    expect((await outcomes(fake, [change(3, ['password'])]))[0]).toEqual(['all', 'restarted', '']);
  });
});
