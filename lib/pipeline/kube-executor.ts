/**
 * The engine bound to the Kubernetes HTTPS client: callers that give no `apiFor` (the CLI, the Lambda worker, the
 * integration tests) reach their clusters through kube-api.ts. The engine itself knows only its port.
 */
import { executeRollouts as executeWithPort, recordHalt as recordHaltWithPort } from '../engine/rollout-executor.ts';
import type { ExecutorOptions, RolloutResult } from '../engine/types.ts';
import { kubeApiFor } from '../kube/kube-api.ts';
import type { RolloutTarget } from '../plan/planner.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SlotStore } from '../slots/slot-store.ts';

/** The engine's options with the API optional: the HTTPS client, each request bounded by `requestTimeoutMs`. */
export type ExecutorSettings = Omit<ExecutorOptions, 'apiFor'> &
  Partial<Pick<ExecutorOptions, 'apiFor'>> & { requestTimeoutMs?: number };

let processSlots: Promise<SlotStore> | undefined;
/** Loaded only when a target is bounded: a Lambda worker passes its DynamoDB store and never runs node:sqlite. */
const processSlotStore = (): Promise<SlotStore> =>
  (processSlots ??= import('../slots/sqlite-slot-store.ts').then(
    ({ SqliteSlotStore }) => new SqliteSlotStore(':memory:'),
  ));

/**
 * The engine's options with what the caller left out filled in: the HTTPS client (each request bounded by
 * `requestTimeoutMs`), and one in-memory slot store per process (`rollout.maxUnavailable` then holds within it only).
 */
export function withKubeApi(settings: ExecutorSettings): ExecutorOptions {
  const { requestTimeoutMs, apiFor, ...rest } = settings;
  return {
    ...rest,
    apiFor: apiFor ?? ((access) => kubeApiFor(access, requestTimeoutMs)),
    slots: settings.slots ?? processSlotStore,
  };
}

export const executeRollouts = (
  table: RoutingTable,
  targets: readonly RolloutTarget[],
  settings: ExecutorSettings,
): Promise<RolloutResult[]> => executeWithPort(table, targets, withKubeApi(settings));

export const recordHalt = (
  table: RoutingTable,
  target: RolloutTarget,
  name: string,
  settings: ExecutorSettings,
  message: string,
): Promise<void> => recordHaltWithPort(table, target, name, withKubeApi(settings), message);

export type { RolloutResult } from '../engine/types.ts';
/** The options callers of this module pass: the engine's, the API optional. */
export type { ExecutorSettings as ExecutorOptions };
