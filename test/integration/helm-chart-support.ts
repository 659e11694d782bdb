/**
 * The chart infra/helm/vault-rollout under helm v3 built from its Go module (test/clusters/build-helm.sh), for
 * helm-chart.test.ts (lint, template, the alpha cluster) and helm-chart-install.test.ts (what a user meets at install:
 * refusals, the values schema, the install notes): running helm, rendering values into objects, and the values and
 * admission policy the tests share.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { helmBinary } from '../clusters/helm.ts';
import { repoRootDir } from './support.ts';

const run = promisify(execFile);
export const CHART = join(repoRootDir, 'infra/helm/vault-rollout');
export const work = mkdtempSync(join(tmpdir(), 'vr-helm-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}
export type Values = Record<string, unknown>;

let files = 0;
export function valuesFile(values: Values): string {
  const file = join(work, `values-${++files}.yaml`);
  writeFileSync(file, stringify(values), { mode: 0o600 });
  return file;
}

/** helm with a home of its own (no repositories, no plugins); rejects with helm's stderr when it fails. */
export async function helm(args: string[]): Promise<string> {
  const { stdout } = await run(helmBinary(), args, {
    cwd: repoRootDir,
    env: {
      PATH: process.env.PATH,
      HOME: work,
      HELM_CACHE_HOME: join(work, 'cache'),
      HELM_CONFIG_HOME: join(work, 'config'),
      HELM_DATA_HOME: join(work, 'data'),
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout;
}

/** `helm template` → its objects; rejects with helm's message when the chart refuses the values. */
export async function render(
  values: Values,
  release = 'vr',
  namespace = 'vault-rollout',
  extra: string[] = [],
): Promise<K8sObject[]> {
  const out = await helm([
    'template',
    release,
    CHART,
    '--namespace',
    namespace,
    '--values',
    valuesFile(values),
    ...extra,
  ]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** helm's message when the chart refuses the values (and `extra` arguments such as --set). */
export async function renderError(values: Values, extra: string[] = []): Promise<string> {
  try {
    await render(values, 'vr', 'vault-rollout', extra);
  } catch (e) {
    return String((e as { stderr?: string }).stderr ?? e);
  }
  throw new Error('helm template accepted values the chart should refuse');
}

export const IN_CLUSTER_ROUTES = `clusters:
  home: { inCluster: true }
vault:
  mounts: { secret: 2 }
routes:
  - name: web
    match: { path: "secret/web/tls" }
    targets:
      - { clusters: [home], namespace: edge, kind: Deployment, name: web }
`;
/** The least a user must set: the image they pushed, the routes, the webhook Secret, and a say on the policy. */
export const MINIMAL: Values = {
  image: { repository: 'registry.example/vault-rollout' },
  routes: IN_CLUSTER_ROUTES,
  webhook: { existingSecret: 'vr-webhook', bearerTokenKey: 'token' },
  admissionPolicy: { skip: true },
};

/** `vault-rollout admission-policy` for a routing table and the chart's ServiceAccount, as a user would run it. */
export function admissionPolicyFor(routes: string, user: string): string {
  const file = join(work, `routes-${++files}.yaml`);
  writeFileSync(file, routes);
  return execFileSync(
    process.execPath,
    [join(repoRootDir, 'lib/cli/main.ts'), 'admission-policy', '--routes', file, '--user', user],
    { cwd: repoRootDir, encoding: 'utf8' },
  );
}
