/**
 * The LISTs `status` makes to count a workload's pods by the revision they run (lib/status/running-pods.ts): pods
 * selected by the label their controller puts on them, and the ReplicaSets and ControllerRevisions that hold each
 * revision's pod template. Metadata and templates only: a pod's or revision's template names Secrets, never holds
 * their data.
 */
import { listKey, type ClusterListing, type ListRequest } from './model.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';

/** The pods a ReplicaSet created carry its template hash; a StatefulSet's or DaemonSet's, their revision's. */
export const POD_LISTS = {
  replicaSets: { apiVersion: 'apps/v1', kind: 'ReplicaSet' },
  revisions: { apiVersion: 'apps/v1', kind: 'ControllerRevision' },
  podsOfReplicaSets: { apiVersion: 'v1', kind: 'Pod', labelSelector: 'pod-template-hash' },
  podsOfRevisions: { apiVersion: 'v1', kind: 'Pod', labelSelector: 'controller-revision-hash' },
  podsOfRollouts: { apiVersion: 'v1', kind: 'Pod', labelSelector: 'rollouts-pod-template-hash' },
} as const satisfies Record<string, Omit<ListRequest, 'namespace'>>;

type PodList = (typeof POD_LISTS)[keyof typeof POD_LISTS];

/** Which of those a kind's pods are counted from: its pods, and where their revisions' templates are. */
export const POD_SOURCES: Readonly<Record<string, { pods: PodList; revisions: PodList } | undefined>> = {
  Deployment: { pods: POD_LISTS.podsOfReplicaSets, revisions: POD_LISTS.replicaSets },
  Rollout: { pods: POD_LISTS.podsOfRollouts, revisions: POD_LISTS.replicaSets },
  StatefulSet: { pods: POD_LISTS.podsOfRevisions, revisions: POD_LISTS.revisions },
  DaemonSet: { pods: POD_LISTS.podsOfRevisions, revisions: POD_LISTS.revisions },
};

/** The extra LISTs for workloads of these kinds in one namespace. */
export function podListsFor(kinds: ReadonlyArray<{ kind: string }>, namespace: string): ListRequest[] {
  const out = new Map<string, ListRequest>();
  for (const { kind } of kinds) {
    const sources = POD_SOURCES[kind];
    if (!sources) continue;
    for (const list of [sources.pods, sources.revisions]) {
      const request = { ...list, namespace };
      out.set(listKey(request), request);
    }
  }
  return [...out.values()];
}

/** A pod or revision LIST: never read for records (a ReplicaSet's template carries its Deployment's). */
export const isPodList = (key: string): boolean =>
  Object.values(POD_LISTS).some((l) => key.startsWith(`${l.apiVersion}/${l.kind}/`));

/**
 * The LIST that holds one of those kinds for a namespace: the namespace's own, or every namespace's (as listed,
 * not filtered: its readers look objects up by namespace, running-pods.ts's index).
 */
export function podListOf(
  listing: ClusterListing,
  list: PodList,
  namespace: string,
): KubeObject[] | { error: string } | undefined {
  return listing.lists.get(listKey({ ...list, namespace })) ?? listing.lists.get(listKey({ ...list, namespace: '' }));
}
