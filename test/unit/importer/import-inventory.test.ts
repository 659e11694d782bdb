/**
 * The bounds and the reasons of import's reader, on an API that answers from a table (the real answers are in
 * test/integration/import.test.ts).
 */
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { IMPORT_LIMITS, readInventory } from '../../../lib/importer/import-inventory.ts';
import type { KubeApi } from '../../../lib/kube/kube-api.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';

type Collections = Record<string, KubeObject[] | 403>;

/** Collections by path (`/apis/group/version/[namespaces/ns/]plural`); a group not listed answers discovery with 404. */
function tableApi(collections: Collections, installed: readonly string[]) {
  const requests: string[] = [];
  const api = {
    resource: async (kind: { apiVersion: string; kind: string }) => {
      if (!installed.includes(kind.apiVersion) && !['apps/v1', 'batch/v1'].includes(kind.apiVersion))
        throw new ApiException(404, 'HTTP 404', {}, {});
      return { plural: `${kind.kind.toLowerCase()}s`, namespaced: kind.kind !== 'ClusterSecretStore' };
    },
    request: async (_method: string, path: string) => {
      requests.push(path);
      const url = new URL(path, 'https://x');
      const items = collections[url.pathname] ?? [];
      if (items === 403) throw new ApiException(403, 'HTTP 403', {}, {});
      const from = Number(url.searchParams.get('continue') ?? 0);
      const limit = Number(url.searchParams.get('limit'));
      const next = from + limit < items.length ? String(from + limit) : undefined;
      return { items: items.slice(from, from + limit), metadata: next ? { continue: next } : {} };
    },
  };
  return { api: api as unknown as KubeApi, requests };
}

const ES = '/apis/external-secrets.io/v1';
const es = (ns: string, name: string): KubeObject => ({
  metadata: { namespace: ns, name },
  spec: { secretStoreRef: { name: 'vault' }, dataFrom: [{ extract: { key: `${name}/db` } }] },
});
const store: KubeObject = {
  metadata: { namespace: 'payments', name: 'vault' },
  spec: { provider: { vault: { server: 'https://v', path: 'secret' } } },
};
const workload = (ns: string, name: string): KubeObject => ({ metadata: { namespace: ns, name }, spec: {} });

describe('readInventory', () => {
  it('pages every list, names the kinds not installed, and lists workloads only where an operator writes a Secret', async () => {
    const many = Array.from({ length: IMPORT_LIMITS.pageSize + 3 }, (_, i) => es('payments', `app${i}`));
    const { api, requests } = tableApi(
      {
        [`${ES}/externalsecrets`]: many,
        [`${ES}/secretstores`]: [store],
        '/apis/apps/v1/deployments': [workload('payments', 'api'), workload('other', 'x')],
      },
      ['external-secrets.io/v1'],
    );
    const inv = await readInventory('alpha', api, { from: new Set(['eso', 'reloader']), namespaces: [] });
    expect(inv.externalSecrets).toHaveLength(IMPORT_LIMITS.pageSize + 3);
    expect(inv.externalSecrets[0]).toMatchObject({ apiVersion: 'external-secrets.io/v1', kind: 'ExternalSecret' });
    expect(requests.filter((r) => r.startsWith(`${ES}/externalsecrets`))).toHaveLength(2);
    expect(requests).toContain('/apis/apps/v1/namespaces/payments/deployments?limit=500');
    expect(requests.some((r) => r.includes('/namespaces/other/'))).toBe(false);
    expect(inv.missing).toEqual([
      'VaultStaticSecret (secrets.hashicorp.com/v1beta1): not installed',
      'VaultAuth (secrets.hashicorp.com/v1beta1): not installed',
      'VaultConnection (secrets.hashicorp.com/v1beta1): not installed',
      'VaultDynamicSecret (secrets.hashicorp.com/v1beta1): not installed',
      'VaultPKISecret (secrets.hashicorp.com/v1beta1): not installed',
      'Rollout (argoproj.io/v1alpha1): not installed',
    ]);
  });

  it('reads only what --from asks for', async () => {
    const { api, requests } = tableApi({}, ['external-secrets.io/v1', 'secrets.hashicorp.com/v1beta1']);
    await readInventory('alpha', api, { from: new Set(['vso']), namespaces: ['payments'] });
    expect(
      requests.every(
        (r) =>
          r.startsWith('/apis/secrets.hashicorp.com/v1beta1/namespaces/payments/') ||
          /^\/apis\/secrets.hashicorp.com\/v1beta1\/namespaces\/vault-secrets-operator-system\/vault(auth|connection)s\?/.test(
            r,
          ),
      ),
    ).toBe(true);
  });

  it("with --namespace, VSO's defaults are read in the operator namespace too; a Role that does not reach it loses only them", async () => {
    const VSO = '/apis/secrets.hashicorp.com/v1beta1';
    const auth: KubeObject = { metadata: { namespace: 'vso', name: 'default' }, spec: {} };
    const { api } = tableApi(
      { [`${VSO}/namespaces/vso/vaultauths`]: [auth], [`${VSO}/namespaces/vso/vaultconnections`]: 403 },
      ['secrets.hashicorp.com/v1beta1'],
    );
    const inv = await readInventory('alpha', api, {
      from: new Set(['vso']),
      namespaces: ['payments'],
      vsoOperatorNamespace: 'vso',
    });
    expect(inv.vaultAuths).toEqual([{ ...auth, apiVersion: 'secrets.hashicorp.com/v1beta1', kind: 'VaultAuth' }]);
    expect(inv.missing).toEqual([
      'VaultConnection (secrets.hashicorp.com/v1beta1): list is forbidden in the VSO operator namespace vso (its default is not known)',
    ]);
  });

  it('lists Namespaces only when a ClusterSecretStore admits namespaces by label', async () => {
    const css = (conditions: unknown[]): KubeObject => ({
      metadata: { name: 'shared' },
      spec: { provider: { vault: { path: 'secret' } }, conditions },
    });
    const namespace: KubeObject = { metadata: { name: 'payments', labels: { team: 'pay' } } };
    for (const [conditions, listed] of [
      [[{ namespaces: ['payments'] }, { namespaceRegexes: ['^pay'] }], false],
      [[{ namespaceSelector: { matchLabels: { team: 'pay' } } }], true],
    ] as const) {
      const { api, requests } = tableApi(
        { [`${ES}/clustersecretstores`]: [css([...conditions])], '/api/v1/namespaces': [namespace] },
        ['external-secrets.io/v1', 'v1'],
      );
      const inv = await readInventory('alpha', api, { from: new Set(['eso']), namespaces: [] });
      expect(requests.some((r) => r.startsWith('/api/v1/namespaces?'))).toBe(listed);
      expect(inv.namespaces).toEqual(listed ? [{ ...namespace, apiVersion: 'v1', kind: 'Namespace' }] : []);
    }
  });

  it('a forbidden list is named, not fatal', async () => {
    const { api } = tableApi({ [`${ES}/clustersecretstores`]: 403 }, ['external-secrets.io/v1']);
    const inv = await readInventory('alpha', api, { from: new Set(['eso']), namespaces: [] });
    expect(inv.missing).toContain('ClusterSecretStore (external-secrets.io/v1): list is forbidden');
  });

  it('refuses more objects of one kind than its bound', async () => {
    const tooMany = Array.from({ length: IMPORT_LIMITS.itemsPerKind + 1 }, (_, i) => es('payments', `a${i}`));
    const { api } = tableApi({ [`${ES}/externalsecrets`]: tooMany }, ['external-secrets.io/v1']);
    await expect(readInventory('alpha', api, { from: new Set(['eso']), namespaces: [] })).rejects.toThrow(
      `more than ${IMPORT_LIMITS.itemsPerKind} ExternalSecret objects`,
    );
  });

  it('stops at its deadline', async () => {
    let t = 0;
    const { api } = tableApi({ [`${ES}/externalsecrets`]: [es('payments', 'a')] }, ['external-secrets.io/v1']);
    const clock = () => (t += IMPORT_LIMITS.deadlineMs);
    await expect(readInventory('alpha', api, { from: new Set(['eso']), namespaces: [] }, clock)).rejects.toThrow(
      'reading took longer than 120 s',
    );
  });
});
