/**
 * Consumer discovery: which workloads of a namespace read a Secret (or mount a SecretProviderClass), found from their
 * pod templates alone — vault-rollout never reads the Secret itself. A pure matcher (table-tested) and one LIST per
 * restartable kind and namespace, not one GET per workload.
 */
import { WorkloadKinds, type WorkloadKind } from '../routing/target-schema.ts';
import type { ApiKind } from './kube-port.ts';
import type { KubeFailure } from './kube-errors.ts';
import { WORKLOAD_KINDS, type KubeObject } from './workload-kinds.ts';

/**
 * What the consumers reference: a Secret by name, or a SecretProviderClass mounted through the Secrets Store CSI
 * driver.
 */
export type ConsumedObject = { secret: string } | { secretProviderClass: string };

/** The CSI driver of the Kubernetes Secrets Store (sigs.k8s.io/secrets-store-csi-driver). */
export const SECRETS_STORE_CSI_DRIVER = 'secrets-store.csi.k8s.io';

/** Where each kind keeps its pod spec. An Argo Rollout with `workloadRef` has none: its Deployment is the consumer. */
const POD_SPEC_PATH: Readonly<Record<WorkloadKind, readonly string[]>> = {
  Deployment: ['spec', 'template', 'spec'],
  StatefulSet: ['spec', 'template', 'spec'],
  DaemonSet: ['spec', 'template', 'spec'],
  Rollout: ['spec', 'template', 'spec'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template', 'spec'],
};

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(rec) : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The pod template's own annotations (where the Vault Agent injector reads its `vault.hashicorp.com/*` settings). */
export function podTemplateAnnotationsOf(kind: WorkloadKind, object: KubeObject): Record<string, string> {
  let at: unknown = object;
  for (const key of POD_SPEC_PATH[kind].slice(0, -1)) at = rec(at)[key];
  const annotations = rec(rec(rec(at).metadata).annotations);
  return Object.fromEntries(Object.entries(annotations).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

export function podSpecOf(kind: WorkloadKind, object: KubeObject): Obj {
  let at: unknown = object;
  for (const key of POD_SPEC_PATH[kind]) at = rec(at)[key];
  return rec(at);
}

const CONTAINER_LISTS = ['containers', 'initContainers', 'ephemeralContainers'] as const;

/**
 * How a pod spec references the object, e.g. `env of container api (secretKeyRef)`, or nothing when it does not.
 * Every form counts: env[].valueFrom.secretKeyRef, envFrom[].secretRef, a `secret` volume, a `projected` volume's
 * secret source, in containers, initContainers and ephemeralContainers; for a SecretProviderClass, a CSI volume of the
 * Secrets Store driver naming it in volumeAttributes.secretProviderClass.
 */
export function referencesIn(podSpec: unknown, consumed: ConsumedObject): string[] {
  const spec = rec(podSpec);
  const found: string[] = [];
  const volumes = arr(spec.volumes);
  if ('secretProviderClass' in consumed) {
    for (const v of volumes) {
      const csi = rec(v.csi);
      if (
        str(csi.driver) === SECRETS_STORE_CSI_DRIVER &&
        str(rec(csi.volumeAttributes).secretProviderClass) === consumed.secretProviderClass
      )
        found.push(`CSI volume ${str(v.name) ?? '?'}`);
    }
    return found;
  }
  const name = consumed.secret;
  for (const list of CONTAINER_LISTS) {
    for (const c of arr(spec[list])) {
      const where = `${list === 'containers' ? 'container' : list === 'initContainers' ? 'init container' : 'ephemeral container'} ${str(c.name) ?? '?'}`;
      if (arr(c.env).some((e) => str(rec(rec(e.valueFrom).secretKeyRef).name) === name))
        found.push(`env of ${where} (secretKeyRef)`);
      if (arr(c.envFrom).some((e) => str(rec(e.secretRef).name) === name))
        found.push(`envFrom of ${where} (secretRef)`);
    }
  }
  for (const v of volumes) {
    if (str(rec(v.secret).secretName) === name) found.push(`secret volume ${str(v.name) ?? '?'}`);
    if (arr(rec(v.projected).sources).some((s) => str(rec(s.secret).name) === name))
      found.push(`projected volume ${str(v.name) ?? '?'}`);
  }
  return found;
}

export interface Consumer {
  kind: WorkloadKind;
  object: KubeObject;
  name: string;
  /** How its pod template references the object (for the result's detail). */
  via: string[];
}

/** The consumers among listed workloads of one kind: pure. */
export function consumersAmong(
  kind: WorkloadKind,
  objects: readonly KubeObject[],
  consumed: ConsumedObject,
): Consumer[] {
  return objects
    .map((object) => ({
      kind,
      object,
      name: object.metadata?.name ?? '',
      via: referencesIn(podSpecOf(kind, object), consumed),
    }))
    .filter((c) => c.via.length > 0)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export type Discovery = { ok: true; consumers: Consumer[] } | { ok: false; reason: string; detail: string };

/** A LIST of one kind in a namespace, with the caller's retries: the objects, or why not. */
export type ListKind = (
  kind: ApiKind,
  namespace: string,
) => Promise<{ ok: true; value: KubeObject[] } | { ok: false; failure: KubeFailure }>;

/**
 * Lists each restartable kind once in the namespace and keeps the workloads that consume the object. A kind the
 * cluster does not serve (no Argo Rollouts CRD: 404) has no consumers; any other failure fails the discovery, since
 * restarting only some consumers would leave the others on the old value without saying so.
 */
export async function discoverConsumers(
  list: ListKind,
  namespace: string,
  consumed: ConsumedObject,
): Promise<Discovery> {
  const perKind = await Promise.all(
    WorkloadKinds.map(async (kind): Promise<Discovery> => {
      const listed = await list(WORKLOAD_KINDS[kind], namespace);
      if (listed.ok) return { ok: true, consumers: consumersAmong(kind, listed.value, consumed) };
      if (listed.failure.reason === 'not found') return { ok: true, consumers: [] };
      return {
        ok: false,
        reason: listed.failure.reason,
        detail: `could not list ${kind}s in ${namespace} to find the consumers: ${listed.failure.detail}`,
      };
    }),
  );
  const failed = perKind.find((d): d is Extract<Discovery, { ok: false }> => !d.ok);
  if (failed) return failed;
  return { ok: true, consumers: perKind.flatMap((d) => (d.ok ? d.consumers : [])) };
}

export const describeConsumed = (c: ConsumedObject): string =>
  'secret' in c ? `Secret ${c.secret}` : `SecretProviderClass ${c.secretProviderClass}`;
