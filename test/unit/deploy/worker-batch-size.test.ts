/** The worker's SQS batch size from the stage's routing table: 10 with settle, else 1 (lib/deploy/worker-batch-size.ts). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { settlingRoutes, workerBatchSize, WorkerBatchSizeError } from '../../../lib/deploy/worker-batch-size.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile } from '../../helpers.ts';
// @ts-expect-error -- a plain ES module for osls's variable resolver, without type declarations
import { workerBatchSize as resolveWorkerBatchSize } from '../../../infra/serverless/iam.js';

const CLUSTERS = 'clusters:\n  alpha: { kubeconfig: { env: KUBECONFIG_ALPHA } }\nvault: { mounts: { secret: 2 } }\n';
const route = (name: string, rollout = '') =>
  `  - name: ${name}\n    match: { path: "secret/${name}" }\n    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: ${name} }]\n${rollout}`;
const tableOf = (yaml: string) => loadRoutingTable(yaml, 'routes.yaml');

const PLAIN = `${CLUSTERS}routes:\n${route('a')}${route('b')}`;
const TOP_SETTLE = `${CLUSTERS}rollout: { settle: 2s }\nroutes:\n${route('a')}`;
const ROUTE_SETTLE = `${CLUSTERS}routes:\n${route('a')}${route('b', '    rollout: { settle: 5s }\n')}`;
const SETTLE_OFF = `${CLUSTERS}rollout: { settle: 5s }\nroutes:\n${route('a', '    rollout: { settle: 0s }\n')}`;

describe('workerBatchSize', () => {
  it.each<[string, string, string | number | undefined, number]>([
    ['no settle, auto: one cluster per invocation', PLAIN, 'auto', 1],
    ['no settle, the parameter unset', PLAIN, undefined, 1],
    ['no settle, an explicit size', PLAIN, 4, 4],
    ['a top-level settle, auto: the FIFO maximum', TOP_SETTLE, 'auto', 10],
    ["one route's own settle, auto", ROUTE_SETTLE, 'auto', 10],
    ['a route that turns the top-level settle off: no route settles', SETTLE_OFF, 'auto', 1],
    ['settle with an explicit size above 1', ROUTE_SETTLE, '5', 5],
    ['an empty parameter is auto', ROUTE_SETTLE, ' ', 10],
  ])('%s', (_name, yaml, param, expected) => {
    expect(workerBatchSize(tableOf(yaml), param)).toBe(expected);
  });

  it('names the routes that settle', () => {
    expect(settlingRoutes(tableOf(ROUTE_SETTLE))).toEqual(['b']);
    expect(settlingRoutes(tableOf(TOP_SETTLE))).toEqual(['a']);
  });

  it('refuses a batch of 1 with settle: it would coalesce nothing', () => {
    expect(() => workerBatchSize(tableOf(ROUTE_SETTLE), 1)).toThrow(WorkerBatchSizeError);
    expect(() => workerBatchSize(tableOf(ROUTE_SETTLE), '1')).toThrow(
      /workerBatchSize 1 with rollout.settle on route\(s\) b: a batch of 1 coalesces nothing/,
    );
  });

  it.each(['0', '11', '2.5', 'ten', '-1'])('refuses %j (FIFO event sources take 1 to 10)', (param) => {
    expect(() => workerBatchSize(tableOf(PLAIN), param)).toThrow(/give auto or a whole number from 1 to 10/);
  });

  it.each(['dev', 'staging', 'prod'])('the %s stage table (no settle) keeps a batch of 1', (stage) => {
    expect(workerBatchSize(tableOf(readRepoFile(`infra/routes/${stage}.yaml`)), 'auto')).toBe(1);
  });
});

describe('infra/serverless/iam.js workerBatchSize (the osls resolver)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vr-batch-size-'));
  const resolver = (routes: string, param: string) => ({
    resolveVariable: async (name: string) => ({ 'param:routes': routes, 'param:workerBatchSize': param })[name],
  });

  it('derives 10 from a table with settle, 1 without, and fails packaging on 1 with settle', async () => {
    const settle = join(dir, 'settle.yaml');
    const plain = join(dir, 'plain.yaml');
    writeFileSync(settle, ROUTE_SETTLE);
    writeFileSync(plain, PLAIN);
    expect(await resolveWorkerBatchSize(resolver(settle, 'auto'))).toBe(10);
    expect(await resolveWorkerBatchSize(resolver(plain, 'auto'))).toBe(1);
    await expect(resolveWorkerBatchSize(resolver(settle, '1'))).rejects.toThrow(WorkerBatchSizeError);
  });
});
