/**
 * Rotation state in DynamoDB (Lambda: the worker and the scheduled reconcile share it). One table, key `pk`, `sk`:
 *   rotation#<key> / waves     released: the highest wave a passed gate released (only ever raised, by a condition)
 *   rotation#<key> / halt      record: the halt as JSON, haltedAt
 *   rotation#<key> / times#<wave>   startedAt, completeAt: each set once (if_not_exists), the gate's clock; ttl
 *   halted#<change key> / <rotation key>    one per change of a halted rotation, so a message's changes are looked up
 *   keys#<path key> / <device>   key baselines: version, record (key names, digests of HMACs), ttl
 *   notify#<event id> / event    notifications' outbox: the event id, put once (a conditional put), ttl
 *   notify#<event id> / sink#<name>   a delivery: body (the event as JSON), state, attempts, dueAt (ms), ttl; while
 *                                pending also outboxDue = "pending", the key of the sparse index `outbox-due` (with
 *                                dueAt) that `vault-rollout worker`'s loop queries for what is due
 *   notes#<rotation key> / <fact>   a rotation's facts for "complete" (`done <cluster>`, `failed <cluster>`), ttl
 *   clearances / <clearedAt>#<rotation key>   who cleared a halt, from where, when (`halts clear`): record, no ttl
 *   breaker#<workload key> / restarts   rollout.breaker's counted restarts: history, rev, ttl
 *   (dynamodb-restart-breaker.ts)
 *   rotation#<key> / approval#<wave>   a wave waiting for `approve`, and who approved it (dynamodb-approvals.ts)
 * Holds paths, versions and workload names, never a secret value. `ttl` is epoch seconds (the table's TTL attribute:
 * DynamoDB deletes an expired item within days, so reads treat an expired item as gone).
 */
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import type { KeyBaseline } from '../plan/changed-keys.ts';
import { parseStoredBaseline, pathKey, storedBaseline, type KeyBaselineStore } from './key-baselines.ts';
import type { NotificationOutbox, OutboxDelivery, TakeResult } from './notification-outbox.ts';
import { DynamoDbNotificationOutbox } from './dynamodb-notification-outbox.ts';
import type { BreakerLimit, BreakerVerdict } from '../plan/restart-breaker.ts';
import { admitRestartDynamoDb, resetRestartsDynamoDb } from './dynamodb-restart-breaker.ts';
import { DynamoDbApprovalStore } from './dynamodb-approvals.ts';
import { ignoreConditionFailed, key, MAX_PAGES } from './dynamodb-items.ts';
import {
  clearanceOf,
  identityKey,
  MAX_LISTED_CLEARANCES,
  MAX_LISTED_HALTS,
  parseStoredClearance,
  parseStoredHalt,
  type ClearedBy,
  type HaltClearance,
  type RotationHalt,
  type RotationStore,
  type WaveMark,
  type WaveTimes,
} from './rotation-store.ts';

/** How long a wave's times are kept: past the longest gate (24 h) and its re-sends, so a stale item never counts. */
const WAVE_TIMES_TTL_MS = 7 * 24 * 3600 * 1000;

export class DynamoDbRotationStore implements RotationStore, KeyBaselineStore, NotificationOutbox {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  private readonly outbox: DynamoDbNotificationOutbox;
  readonly approvals: DynamoDbApprovalStore;

  constructor(options: { client: DynamoDBClient; table: string }) {
    this.client = options.client;
    this.table = options.table;
    this.outbox = new DynamoDbNotificationOutbox(options);
    this.approvals = new DynamoDbApprovalStore(options);
  }

  admitRestart(workload: string, token: string, now: number, limit: BreakerLimit): Promise<BreakerVerdict> {
    return admitRestartDynamoDb({ client: this.client, table: this.table }, workload, token, now, limit);
  }

  resetRestarts(workload: string): Promise<void> {
    return resetRestartsDynamoDb({ client: this.client, table: this.table }, workload);
  }

  async releasedWave(rotation: string): Promise<number> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'waves'), ConsistentRead: true }),
    );
    return Number(out.Item?.released?.N ?? 0);
  }

  async releaseWave(rotation: string, wave: number): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(`rotation#${rotation}`, 'waves'),
          UpdateExpression: 'SET released = :w',
          ConditionExpression: 'attribute_not_exists(released) OR released < :w',
          ExpressionAttributeValues: { ':w': { N: String(wave) } },
        }),
      );
    } catch (e) {
      // Already released this far by another gate: nothing to raise.
      if (!(e instanceof Error && e.name === 'ConditionalCheckFailedException')) throw e;
    }
  }

  async markWave(rotation: string, wave: number, mark: WaveMark, at: string): Promise<WaveTimes> {
    // if_not_exists: the first time written stays, whoever writes after (one atomic update, no read in between).
    const out = await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: key(`rotation#${rotation}`, wavesTimesKey(wave)),
        UpdateExpression: 'SET #mark = if_not_exists(#mark, :at), #ttl = if_not_exists(#ttl, :ttl)',
        ExpressionAttributeNames: { '#mark': mark, '#ttl': 'ttl' },
        ExpressionAttributeValues: {
          ':at': { S: at },
          ':ttl': { N: String(Math.ceil((Date.parse(at) + WAVE_TIMES_TTL_MS) / 1000)) },
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return waveTimesOf(out.Attributes);
  }

  async waveTimes(rotation: string, wave: number): Promise<WaveTimes> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: key(`rotation#${rotation}`, wavesTimesKey(wave)),
        ConsistentRead: true,
      }),
    );
    return waveTimesOf(out.Item);
  }

  async forgetWave(rotation: string, wave: number): Promise<void> {
    // An update, not a delete: the worker's role updates the rotation items and deletes none (serverless.yml); the
    // emptied item goes with its ttl.
    await this.client
      .send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(`rotation#${rotation}`, wavesTimesKey(wave)),
          UpdateExpression: 'REMOVE startedAt, completeAt',
          ConditionExpression: 'attribute_exists(pk)',
        }),
      )
      .catch(ignoreConditionFailed);
  }

  async halt(halt: RotationHalt): Promise<void> {
    // The lookup items first: a halt is never visible without them, and a retry rewrites the same items.
    for (const identity of new Set(halt.changes))
      await this.client.send(
        new PutItemCommand({ TableName: this.table, Item: key(`halted#${identityKey(identity)}`, halt.rotation) }),
      );
    await this.client.send(
      new PutItemCommand({
        TableName: this.table,
        Item: {
          ...key(`rotation#${halt.rotation}`, 'halt'),
          haltedAt: { S: halt.haltedAt },
          record: { S: JSON.stringify(halt) },
        },
      }),
    );
  }

  async haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]> {
    const rotations = new Set<string>();
    for (const identity of new Set(changeIdentities)) {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `halted#${identityKey(identity)}` } },
          ConsistentRead: true,
          Limit: 100,
        }),
      );
      for (const item of out.Items ?? []) if (item.sk?.S) rotations.add(item.sk.S);
    }
    const halts: RotationHalt[] = [];
    for (const rotation of rotations) {
      const halt = await this.read(rotation);
      // A lookup item whose halt was cleared in between is no halt.
      if (halt) halts.push(halt);
    }
    return halts;
  }

  async halts(): Promise<RotationHalt[]> {
    const halts: RotationHalt[] = [];
    let start: Record<string, AttributeValue> | undefined;
    for (let page = 0; page < MAX_PAGES && halts.length < MAX_LISTED_HALTS; page++) {
      const out = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          FilterExpression: 'sk = :halt',
          ExpressionAttributeValues: { ':halt': { S: 'halt' } },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const halt = item.record?.S ? parseStoredHalt(item.record.S) : undefined;
        if (halt) halts.push(halt);
      }
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    return halts.sort((a, b) => a.haltedAt.localeCompare(b.haltedAt)).slice(0, MAX_LISTED_HALTS);
  }

  async clear(rotation: string, by?: ClearedBy): Promise<RotationHalt | undefined> {
    const halt = await this.read(rotation);
    // The trail first: a clear cut short after it leaves the halt and a trail of a clear to retry, never the reverse.
    if (halt && by) {
      const item = {
        ...key(CLEARANCES, `${by.clearedAt}#${rotation}`),
        record: { S: JSON.stringify(clearanceOf(halt, by)) },
      };
      await this.client.send(new PutItemCommand({ TableName: this.table, Item: item }));
    }
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'halt') }));
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'waves') }));
    // A wave's times: one item per wave that started (at most the table's 100 waves, one page).
    const times = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :times)',
        ExpressionAttributeValues: { ':pk': { S: `rotation#${rotation}` }, ':times': { S: 'times#' } },
        ConsistentRead: true,
      }),
    );
    for (const item of times.Items ?? [])
      if (item.sk?.S)
        await this.client.send(
          new DeleteItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, item.sk.S) }),
        );
    for (const identity of new Set(halt?.changes ?? []))
      await this.client.send(
        new DeleteItemCommand({ TableName: this.table, Key: key(`halted#${identityKey(identity)}`, rotation) }),
      );
    await this.approvals.forget(rotation);
    return halt;
  }

  async clearances(): Promise<HaltClearance[]> {
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: CLEARANCES } },
        ScanIndexForward: false,
        ConsistentRead: true,
        Limit: MAX_LISTED_CLEARANCES,
      }),
    );
    return (out.Items ?? []).flatMap((item) => (item.record?.S ? (parseStoredClearance(item.record.S) ?? []) : []));
  }

  async baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: key(`keys#${pathKey(path)}`, device), ConsistentRead: true }),
    );
    // DynamoDB's TTL removes items late (up to days): an expired item is no baseline.
    if (!out.Item?.record?.S || Number(out.Item.ttl?.N ?? 0) * 1000 <= nowMs) return undefined;
    return parseStoredBaseline(out.Item.record.S, device);
  }

  async putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: {
            ...key(`keys#${pathKey(path)}`, baseline.device),
            version: { N: String(baseline.version) },
            record: { S: storedBaseline(baseline) },
            ttl: { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
          // Versions only move forward: an older write's baseline, arriving late, never replaces a newer one.
          ConditionExpression: 'attribute_not_exists(#version) OR #version < :v OR #ttl <= :now',
          ExpressionAttributeNames: { '#version': 'version', '#ttl': 'ttl' },
          ExpressionAttributeValues: {
            ':v': { N: String(baseline.version) },
            ':now': { N: String(Math.floor(nowMs / 1000)) },
          },
        }),
      );
    } catch (e) {
      if (!(e instanceof Error && e.name === 'ConditionalCheckFailedException')) throw e;
    }
  }

  async forgetBaseline(device: string, path: string): Promise<void> {
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`keys#${pathKey(path)}`, device) }));
  }

  async clearBaselines(path: string): Promise<void> {
    // One item per audit device that wrote the path: a handful.
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: `keys#${pathKey(path)}` } },
        ConsistentRead: true,
        Limit: 100,
      }),
    );
    for (const item of out.Items ?? [])
      if (item.sk?.S)
        await this.client.send(
          new DeleteItemCommand({ TableName: this.table, Key: key(`keys#${pathKey(path)}`, item.sk.S) }),
        );
  }

  // The notification outbox: kept in the same table (its items: the file comment), by DynamoDbNotificationOutbox.
  enqueueOnce(eventId: string, sinks: readonly string[], body: string, nowMs: number, ttlMs: number): Promise<boolean> {
    return this.outbox.enqueueOnce(eventId, sinks, body, nowMs, ttlMs);
  }

  takeDue(nowMs: number, limit: number, leaseMs: number): Promise<OutboxDelivery[]> {
    return this.outbox.takeDue(nowMs, limit, leaseMs);
  }

  take(eventId: string, sink: string, nowMs: number, leaseMs: number): Promise<TakeResult> {
    return this.outbox.take(eventId, sink, nowMs, leaseMs);
  }

  sent(eventId: string, sink: string): Promise<void> {
    return this.outbox.sent(eventId, sink);
  }

  failed(eventId: string, sink: string, attempts: number, retryAtMs: number | undefined): Promise<void> {
    return this.outbox.failed(eventId, sink, attempts, retryAtMs);
  }

  note(rotation: string, fact: string, nowMs: number, ttlMs: number): Promise<void> {
    return this.outbox.note(rotation, fact, nowMs, ttlMs);
  }

  notes(rotation: string, nowMs: number): Promise<string[]> {
    return this.outbox.notes(rotation, nowMs);
  }

  private async read(rotation: string): Promise<RotationHalt | undefined> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'halt'), ConsistentRead: true }),
    );
    return out.Item?.record?.S ? parseStoredHalt(out.Item.record.S) : undefined;
  }
}

/** The one partition of the clearances, sorted by time: the latest are one Query. */
const CLEARANCES = 'clearances';
const wavesTimesKey = (wave: number): string => `times#${wave}`;
/** A wave's times from its item; DynamoDB's TTL deletes late, so an expired item counts as none. */
function waveTimesOf(item: Record<string, AttributeValue> | undefined): WaveTimes {
  if (!item || Number(item.ttl?.N ?? 0) * 1000 <= Date.now()) return {};
  return {
    ...(item.startedAt?.S ? { startedAt: item.startedAt.S } : {}),
    ...(item.completeAt?.S ? { completeAt: item.completeAt.S } : {}),
  };
}
