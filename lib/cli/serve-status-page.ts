/**
 * serve's --status-page: GET /status rendered from status's own source (the rotation store, the cluster clients,
 * Vault's versions when VAULT_ADDR is set) and serve's queue, read at most once per few seconds.
 */
import type { ClusterClients } from '../kube/cluster-clients.ts';
import type { SqliteRolloutQueue } from '../queue/sqlite-queue.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { CliIo } from './io.ts';
import { openStatusSource, statusPage, statusVault, type StatusSnapshot } from './status-command.ts';
import { safeToRevoke, type SafeToRevokeAnswer } from '../report/safe-to-revoke.ts';

export interface StatusPageServer {
  render(): Promise<string>;
  /** GET /safe-to-revoke's answer for one path, from the same (reused) read of the fleet as the page. */
  safeToRevoke(path: string): Promise<SafeToRevokeAnswer>;
  close(): void;
}

/** A read of the fleet is reused this long: a page left open on several phones, each refreshing, reads it once. */
const PAGE_READ_REUSE_MS = 5_000;

/**
 * serve's status page: status's source (openStatusSource) on serve's own rotation store and cluster clients, Vault's
 * current versions when VAULT_ADDR is set (as for `status`), and the queue's newest dead letters. One read at a time,
 * reused for PAGE_READ_REUSE_MS; each request renders the page (cheap) from it.
 */
/** One read at a time, reused for PAGE_READ_REUSE_MS; a failed read is not reused. */
function reusedReads(read: () => Promise<StatusSnapshot>): () => Promise<StatusSnapshot> {
  let last: { at: number; snapshot: Promise<StatusSnapshot> } | undefined;
  return () => {
    if (last === undefined || Date.now() - last.at > PAGE_READ_REUSE_MS) {
      const reading = read();
      last = { at: Date.now(), snapshot: reading };
      reading.catch(() => {
        if (last?.snapshot === reading) last = undefined;
      });
    }
    return last.snapshot;
  };
}

export async function statusPageServer(
  io: CliIo,
  table: RoutingTable,
  routesFile: string,
  o: {
    rotations: RotationStore;
    clients: ClusterClients;
    queue: SqliteRolloutQueue;
    refreshSeconds: number;
    source: string;
  },
): Promise<StatusPageServer | { error: string }> {
  const vaultAddr = io.env.VAULT_ADDR;
  let vault: Awaited<ReturnType<typeof statusVault>> | undefined;
  if (vaultAddr) {
    if (!URL.canParse(vaultAddr) || !/^https?:\/\//.test(vaultAddr))
      return { error: 'VAULT_ADDR must be http(s)://HOST:PORT' };
    vault = await statusVault(io, vaultAddr, io.env.VAULT_NAMESPACE);
    if ('error' in vault)
      return {
        error: `${vault.error} (VAULT_ADDR is set: the page reads Vault's current versions; unset it to compare what the clusters record)`,
      };
  }
  const source = openStatusSource(io, table, routesFile, {
    clusters: new Set(),
    rotations: o.rotations,
    clients: o.clients,
    ...(vault && 'vault' in vault ? { vault: vault.vault } : {}),
  });
  const snapshot = reusedReads(() => source.read());
  return {
    render: async () => {
      const status = await snapshot();
      const { deadLetters } = o.queue.counts();
      return statusPage(table, status, {
        store: source.store,
        generatedAt: Date.now(),
        refreshSeconds: o.refreshSeconds,
        source: o.source,
        deadLetters: { recent: o.queue.recentDeadLetters(20), total: deadLetters },
      });
    },
    safeToRevoke: async (path) => {
      const status = await snapshot();
      return safeToRevoke(status, status.halts, path);
    },
    close: () => {
      if (vault && 'auth' in vault) vault.auth.stop();
      source.close();
    },
  };
}
