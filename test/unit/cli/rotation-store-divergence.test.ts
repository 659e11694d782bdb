/**
 * `apply` and `reset-version` from another machine than the deployment's: a table whose `rotationStore` names the
 * store its deployment keeps halts in (a Lambda stage's DynamoDB table, serve's SQLite file in its pod) is refused
 * unless the command is pointed at that store, before anything is read from a cluster. Run through main(), with a
 * cluster whose kubeconfig does not exist: a command that went on would fail on it, not on the store.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { storeDivergence } from '../../../lib/rotations/rotation-store-from-env.ts';
import { memoryIo } from '../../helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-store-divergence-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const serveFile = join(dir, 'serve', 'rotations.sqlite');
writeFileSync(join(dir, 'exists.sqlite'), '');

const table = (store: string) => `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(join(dir, 'no-such.kubeconfig'))} } }
vault: { mounts: { secret: 2 } }
rotationStore: ${store}
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha], namespace: app, kind: Deployment, name: api }]
`;
const request = { id: 'r1', operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/app/db' };
const audit = `${JSON.stringify({ time: '2026-11-28T10:00:00Z', type: 'response', request, response: { data: { version: 3 } } })}\n`;

async function run(argv: string[], store: string, env: Record<string, string> = {}) {
  const files = { 'routes.yaml': table(store), 'in.ndjson': audit };
  const io = memoryIo(files, { XDG_STATE_HOME: join(dir, 'laptop-state'), ...env });
  const code = await main(argv, io);
  return { code, err: io.err };
}
const apply = ['apply', '--routes', 'routes.yaml', '--input', 'in.ndjson', '--no-wait', '-o', 'json'];
const resetVersion = ['reset-version', '--routes', 'routes.yaml', '--path', 'secret/app/db', '--version', '3'];

describe("a table whose rotationStore is a Lambda stage's DynamoDB table", () => {
  const store = '{ dynamodb: vault-rollout-prod-rotation-state }';

  const commands = [
    ['apply', apply],
    ['reset-version', resetVersion],
  ] as const;
  it.each(commands)('%s from a laptop is refused, saying how to point at it', async (_name, argv) => {
    const { code, err } = await run(argv, store);
    expect(code).toBe(1);
    expect(err).toContain(
      "not started: routes.yaml: the table's rotationStore is the DynamoDB table vault-rollout-prod-rotation",
    );
    expect(err).toContain('VAULT_ROLLOUT_STATE_TABLE=vault-rollout-prod-rotation-state');
    // Refused before any cluster is reached: nothing about alpha's kubeconfig.
    expect(err).not.toContain('no-such.kubeconfig');
  });

  it("reconcile worked here is refused; with --queue-url the deployment's worker holds the halts: it goes on", async () => {
    const reconcile = ['reconcile', '--routes', 'routes.yaml', '--vault-addr', 'http://127.0.0.1:9'];
    const here = await run(reconcile, store);
    expect(here.code).toBe(1);
    expect(here.err).toContain("reconcile: not started: routes.yaml: the table's rotationStore is the DynamoDB table");
    const queueUrl = 'https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo';
    const queued = await run([...reconcile, '--queue-url', queueUrl], store);
    expect(queued.err).not.toContain('rotationStore');
  });

  it('apply pointed at another table is refused too', async () => {
    const env = { VAULT_ROLLOUT_STATE_TABLE: 'vault-rollout-dev-rotation-state', AWS_REGION: 'eu-west-1' };
    const { code, err } = await run(apply, store, env);
    expect(code).toBe(1);
    expect(err).toContain('this would use the DynamoDB table vault-rollout-dev-rotation-state');
  });

  it("a dry run goes on, with a warning that the halts it shows are this store's", async () => {
    const { err } = await run([...apply, '--dry-run'], store);
    expect(err).toContain("warning: routes.yaml: the table's rotationStore is the DynamoDB table");
    expect(err).not.toContain('not started');
  });
});

describe("a table whose rotationStore is serve's SQLite file", () => {
  it("apply with the laptop's own state file is refused", async () => {
    const { code, err } = await run(apply, `{ sqlite: ${JSON.stringify(serveFile)} }`);
    expect(code).toBe(1);
    const laptop = join(dir, 'laptop-state');
    expect(err).toContain(
      `the table's rotationStore is the SQLite file ${serveFile} where serve runs, and this would use the SQLite file ${laptop}`,
    );
    expect(err).toContain('kubectl exec');
  });

  it("apply pointed at that path where no such file exists is refused: a missing file is not serve's", async () => {
    const store = `{ sqlite: ${JSON.stringify(serveFile)} }`;
    const { code, err } = await run(apply, store, { VAULT_ROLLOUT_STATE_DB: serveFile });
    expect(code).toBe(1);
    expect(err).toContain('which does not exist here');
  });

  it('apply pointed at the file goes on to the clusters', async () => {
    const file = join(dir, 'exists.sqlite');
    const { code, err } = await run(apply, `{ sqlite: ${JSON.stringify(file)} }`, { VAULT_ROLLOUT_STATE_DB: file });
    expect(err).not.toContain('rotationStore');
    // It went on: alpha's kubeconfig is missing, so the restart fails there (exit 3), not on the store.
    expect(code).toBe(3);
  });
});

describe('storeDivergence', () => {
  const exists = (f: string) => f === '/var/lib/vault-rollout/vault-rollout/rotations.sqlite';
  const podDefault = '/var/lib/vault-rollout/vault-rollout/rotations.sqlite';

  it.each([
    ['no rotationStore: any store', undefined, {}, undefined],
    ['the same DynamoDB table', { dynamodb: 't1' }, { VAULT_ROLLOUT_STATE_TABLE: 't1' }, undefined],
    ["serve's own default file, in its pod", { sqlite: podDefault }, {}, undefined],
    [
      'the same file by another spelling',
      { sqlite: podDefault },
      { VAULT_ROLLOUT_STATE_DB: podDefault.replace('/vault-rollout/', '/./vault-rollout/') },
      undefined,
    ],
    [
      'a DynamoDB table where a file is declared',
      { sqlite: podDefault },
      { VAULT_ROLLOUT_STATE_TABLE: 't1' },
      /SQLite .* the DynamoDB table t1/,
    ],
    [
      'a file where a DynamoDB table is declared',
      { dynamodb: 't1' },
      { VAULT_ROLLOUT_STATE_DB: podDefault },
      /table t1, and this would use the SQLite/,
    ],
  ] as const)('%s', (_name, declared, env, expected) => {
    const why = storeDivergence(declared, env, podDefault, exists);
    if (expected === undefined) expect(why).toBeUndefined();
    else expect(why).toMatch(expected);
  });
});
