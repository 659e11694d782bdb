/**
 * Vault event notifications as JSON CloudEvents (`sys/events/subscribe/<type>?json=true`).
 * 1.15 shape: `source: https://vaultproject.io/`, `metadata.path` namespace-relative and including the mount.
 * 1.16+ shape (Enterprise only; the current docs, 1.21, show the same): `source: vault://<node>`, adds `data.namespace`
 * ("team-a/", absent in root), `metadata.data_path` (the path to read the data at, mount included),
 * `metadata.vault_index` and `plugin_info.version`. `vault_index` is kept on the change (`vaultIndex`) when it is
 * bounded base64 (vault-index.ts), for a metadata read made for the change; one that is not is left out and the
 * change still counts: it is a freshness hint, and losing the rotation over it would be worse than a stale read.
 * The 1.13/1.14 experiment put the path relative to the mount; that is accepted too.
 */
import { z } from 'zod';
import { guessMount, trimSlashes, underMount } from './kv-mounts.ts';
import { changed, describeIssues, ignore, isObject, reject, type RecordContext, type RecordOutcome } from './record.ts';
import type { KvVersion, Operation } from './secret-change.ts';
import { isVaultIndex } from './vault-index.ts';

export const EventNotificationSchema = z.object({
  id: z.string(),
  time: z.string().optional(),
  data: z.object({
    event: z.object({ id: z.string().optional(), metadata: z.record(z.string(), z.unknown()).default({}) }),
    event_type: z.string(),
    namespace: z.string().optional(),
    // Other plugin_info fields (mount_class, mount_accessor, version) are not read: a type change there refuses
    // nothing.
    plugin_info: z.object({ mount_path: z.string().optional(), plugin: z.string().optional() }).optional(),
  }),
});

export function isEventNotification(v: unknown): v is Record<string, unknown> {
  return isObject(v) && isObject(v.data) && ('event_type' in v.data || 'event' in v.data);
}

/** kv-v1/* and kv-v2/* event types and what they mean; the others are metadata or reads. */
const KV_EVENTS: Readonly<Record<string, Operation | 'metadata' | 'read'>> = {
  'kv-v1/write': 'write',
  'kv-v1/delete': 'delete',
  'kv-v2/data-write': 'write',
  'kv-v2/data-patch': 'write',
  'kv-v2/data-delete': 'delete',
  'kv-v2/delete': 'delete',
  'kv-v2/undelete': 'undelete',
  'kv-v2/destroy': 'destroy',
  'kv-v2/metadata-delete': 'destroy',
  'kv-v2/metadata-write': 'metadata',
  'kv-v2/metadata-patch': 'metadata',
  'kv-v2/config-write': 'metadata',
  'kv-v2/metadata-read': 'read',
};

const V2_ENDPOINT = /^(?:data|metadata|delete|undelete|destroy)\//;

export function parseEventNotification(value: unknown, ctx: RecordContext): RecordOutcome {
  const parsed = EventNotificationSchema.safeParse(value);
  if (!parsed.success) return reject(`not a valid event notification: ${describeIssues(parsed.error.issues)}`);
  const { id, time, data } = parsed.data;
  const eventType = data.event_type;
  const meaning = KV_EVENTS[eventType];
  if (meaning === undefined || (data.plugin_info?.plugin !== undefined && data.plugin_info.plugin !== 'kv')) {
    return ignore('not-kv', `event type ${eventType}`);
  }
  const metadata = data.event.metadata;
  if (metadata.modified !== 'true') return ignore('not-modified', `${eventType} did not modify anything`);
  if (meaning === 'metadata') return ignore('metadata', eventType);
  if (meaning === 'read') return ignore('read', eventType);

  const rawPath =
    typeof metadata.path === 'string'
      ? metadata.path
      : typeof metadata.data_path === 'string'
        ? metadata.data_path
        : undefined;
  if (rawPath === undefined) return reject('data.event.metadata.path: missing');
  const kvVersion: KvVersion = eventType.startsWith('kv-v1/') ? 1 : 2;
  const namespace = trimSlashes(data.namespace ?? '');
  const path = trimSlashes(rawPath);
  const mount = trimSlashes(data.plugin_info?.mount_path ?? '') || guessMount(ctx.mounts, namespace, path);
  // Before 1.15 the path was relative to the mount.
  const rest = underMount(path, mount) ?? path;
  const key = kvVersion === 2 ? rest.replace(V2_ENDPOINT, '') : rest;
  if (key === '' || (kvVersion === 2 && key === rest))
    return reject(`data.event.metadata.path: no secret key in ${JSON.stringify(path)}`);

  const current = typeof metadata.current_version === 'string' ? Number(metadata.current_version) : Number.NaN;
  return changed(ctx, {
    namespace,
    mount,
    key,
    operation: meaning,
    version: kvVersion === 2 && Number.isSafeInteger(current) && current >= 0 ? current : null,
    kvVersion,
    kvVersionFrom: 'event-type',
    source: 'event',
    id,
    time: time ?? '',
    ...(isVaultIndex(metadata.vault_index) ? { vaultIndex: metadata.vault_index } : {}),
  });
}
