// The chart infra/helm/vault-rollout as a user meets it at `helm install`, with the real helm: what it refuses and
// the message that says what to set (no image, no admission policy, a NetworkPolicy with no API server, a misspelt
// key through values.schema.json, a Kubernetes older than kubeVersion), and the install notes `helm install` prints
// (a dry run against the alpha cluster): how to operate the pod with `kubectl exec … vault-rollout`, the uninstall
// note, and the warnings for a skipped admission policy, a NetworkPolicy nobody may reach, and the status page.
import { describe, expect, it } from 'vitest';
import { cluster } from './support.ts';
import {
  admissionPolicyFor,
  CHART,
  helm,
  IN_CLUSTER_ROUTES,
  MINIMAL,
  renderError,
  valuesFile,
  type Values,
} from './helm-chart-support.ts';

describe('helm chart: what it refuses, saying what to set', () => {
  it('refuses values it cannot install safely', async () => {
    expect(await renderError({ ...MINIMAL, routes: '' })).toContain(
      'routes (the routing table, YAML text) is required',
    );
    expect(await renderError({ ...MINIMAL, webhook: {} })).toContain('webhook.existingSecret is required');
    expect(await renderError({ ...MINIMAL, webhook: { existingSecret: 'vr-webhook' } })).toContain(
      'set webhook.hmacSecretKey and/or webhook.bearerTokenKey',
    );
    expect(await renderError({ ...MINIMAL, replicaCount: 2 })).toContain('replicaCount must be 1');
    expect(
      await renderError({
        ...MINIMAL,
        rbac: { extraRules: [{ apiGroups: ['example.com'], resources: ['*'], verbs: ['patch'] }] },
      }),
    ).toContain('may not contain a wildcard');
    expect(
      await renderError({
        ...MINIMAL,
        rbac: { extraRules: [{ apiGroups: ['example.com'], resources: ['harbors'], verbs: ['*'] }] },
      }),
    ).toContain('may not contain a wildcard');
    // A policy generated for another identity would bound nobody: the chart says which command fixes it.
    const other = admissionPolicyFor(IN_CLUSTER_ROUTES, 'system:serviceaccount:vault-rollout:vault-rollout');
    expect(await renderError({ ...MINIMAL, admissionPolicy: { manifest: other } })).toContain(
      '--user system:serviceaccount:vault-rollout:vr-vault-rollout',
    );
    expect(await renderError({ ...MINIMAL, kubeconfigSecrets: [{ name: 'Prod_EU', secretName: 's' }] })).toContain(
      'must be a lowercase cluster name',
    );
  });

  it('refuses the unpublished default image: no image.repository, and says how to build and push one', async () => {
    const error = await renderError({ ...MINIMAL, image: {} });
    expect(error).toContain("image.repository is required: no registry publishes vault-rollout's image yet");
    expect(error).toContain('--set image.repository=REGISTRY/vault-rollout --set image.digest=sha256:');
  });

  it('requires an admission policy, or admissionPolicy.skip=true, and prints the command that generates it', async () => {
    const error = await renderError({ ...MINIMAL, admissionPolicy: {} });
    expect(error).toContain('admissionPolicy.manifest is required');
    expect(error).toContain(
      'vault-rollout admission-policy --routes routes.yaml --user system:serviceaccount:vault-rollout:vr-vault-rollout',
    );
    expect(error).toContain('admissionPolicy.skip=true');
  });

  it("refuses a NetworkPolicy with no egress to any API server, and says how to find this cluster's", async () => {
    const error = await renderError({ ...MINIMAL, networkPolicy: { enabled: true } });
    expect(error).toContain('networkPolicy.enabled without egress to any API server');
    expect(error).toContain('kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes');
  });

  it('refuses a misspelt key or a wrong type in --set or a values file (values.schema.json)', async () => {
    expect(await renderError(MINIMAL, ['--set', 'image.respository=registry.example/x'])).toMatch(
      /additional propert(y|ies) .*respository.* not allowed/,
    );
    expect(await renderError(MINIMAL, ['--set', 'serve.prot=8080'])).toMatch(
      /additional propert(y|ies) .*prot.* not allowed/,
    );
    // --set takes `yes` as a string (a values file would give YAML 1.1's true).
    expect(await renderError(MINIMAL, ['--set', 'networkPolicy.enabled=yes'])).toMatch(
      /\/networkPolicy\/enabled'?: got string, want boolean/,
    );
    expect(await renderError({ ...MINIMAL, statusPage: { enabled: true, refreshSeconds: 1 } })).toContain(
      '/statusPage/refreshSeconds',
    );
  });

  it('refuses a Kubernetes older than 1.30 (kubeVersion: the admission policy is GA from 1.30)', async () => {
    expect(await renderError(MINIMAL, ['--kube-version', '1.29.4'])).toContain(
      'chart requires kubeVersion: >=1.30.0-0',
    );
  });
});

/**
 * The notes `helm install` prints, from a dry run against the alpha cluster (nothing is installed). The test clusters
 * have an admission policy named vault-rollout of their own, which helm would refuse to adopt: --take-ownership lets
 * the dry run past that check (a dry run changes nothing).
 */
async function installNotes(values: Values): Promise<string> {
  const out = await helm([
    'install',
    'vr',
    CHART,
    '--dry-run',
    '--take-ownership',
    '--namespace',
    'vault-rollout',
    '--kubeconfig',
    cluster('alpha').adminKubeconfig,
    '--values',
    valuesFile(values),
  ]);
  const at = out.indexOf('NOTES:\n');
  expect(at).toBeGreaterThan(0);
  return out.slice(at + 'NOTES:\n'.length);
}

describe('helm chart: the install notes (helm install --dry-run on alpha)', () => {
  const exec = 'kubectl -n vault-rollout exec vr-vault-rollout-0 -c serve --';

  it('say where serve listens, how to operate it with kubectl exec, what uninstall keeps; warn when the policy is skipped', async () => {
    const notes = await installNotes(MINIMAL);
    expect(notes).toContain('http://vr-vault-rollout.vault-rollout.svc:8787');
    expect(notes).toContain('(registry.example/vault-rollout:0.1.0)');
    for (const command of [
      'doctor --routes /etc/vault-rollout/routes/routes.yaml',
      'status --routes /etc/vault-rollout/routes/routes.yaml',
      'halts',
      'halts clear ROTATION',
    ]) {
      expect(notes).toContain(`${exec} vault-rollout ${command}\n`);
    }
    expect(notes).toContain('kubectl -n vault-rollout delete pvc data-vr-vault-rollout-0');
    expect(notes).toContain('WARNING: no admission policy (admissionPolicy.skip=true)');
    expect(notes).toContain('--user system:serviceaccount:vault-rollout:vr-vault-rollout > policy.yaml');
    expect(notes).not.toContain('/status');
  });

  it('with the policy: no warning, and the policy goes with the release', async () => {
    const manifest = admissionPolicyFor(IN_CLUSTER_ROUTES, 'system:serviceaccount:vault-rollout:vr-vault-rollout');
    const notes = await installNotes({ ...MINIMAL, admissionPolicy: { manifest } });
    expect(notes).not.toContain('WARNING');
    expect(notes).toContain('admission\npolicy and binding named vault-rollout go with the release');
  });

  it('warn when the NetworkPolicy lets nobody in, or reaches the API servers only through extra rules', async () => {
    const notes = await installNotes({
      ...MINIMAL,
      admissionPolicy: {
        manifest: admissionPolicyFor(IN_CLUSTER_ROUTES, 'system:serviceaccount:vault-rollout:vr-vault-rollout'),
      },
      networkPolicy: { enabled: true, egress: { extra: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] } },
    });
    expect(notes).toContain("WARNING: networkPolicy.ingressFrom is empty: nothing can reach serve's port");
    expect(notes).toContain('WARNING: networkPolicy.egress.apiServers is empty');
    const open = await installNotes({
      ...MINIMAL,
      networkPolicy: {
        enabled: true,
        ingressFrom: [{ podSelector: {} }],
        egress: { apiServers: [{ cidr: '10.0.0.1/32' }] },
      },
    });
    expect(open).not.toContain('networkPolicy');
  });

  it('say how to open the status page when it is served, and warn when no browser can sign in', async () => {
    const notes = await installNotes({ ...MINIMAL, statusPage: { enabled: true } });
    expect(notes).toContain(
      'kubectl -n vault-rollout port-forward svc/vr-vault-rollout 8787, then open\nhttp://127.0.0.1:8787/status',
    );
    expect(notes).not.toContain('WARNING: statusPage');
    const hmacOnly = await installNotes({
      ...MINIMAL,
      statusPage: { enabled: true },
      webhook: { existingSecret: 's', hmacSecretKey: 'hmac' },
    });
    expect(hmacOnly).toContain('WARNING: statusPage.enabled without webhook.bearerTokenKey');
  });
});
