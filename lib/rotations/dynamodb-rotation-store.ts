/**
 * Rotation state in DynamoDB (Lambda: the worker and the scheduled reconcile share it). One table, key `pk`, `sk`:
 *   rotation#<key> / waves     released: the highest wave a passed gate released (only ever raised, by a condition)
 *   rotation#<key> / halt      record: the halt as JSON, haltedAt
 *   halted#<change key> / <rotation key>    one per change of a halted rotation, so a message's changes are looked up
 *   keys#<path key> / <device>   key baselines (issue #24): version, record (key names, digests of HMACs), ttl
 * Holds paths, versions and workload names, never a secret value.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, QueryCommand, ScanCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KeyBaseline } from '../plan/changed-keys.ts';
import { parseStoredBaseline, pathKey, storedBaseline, type KeyBaselineStore } from './key-baselines.ts';
import { identityKey, MAX_LISTED_HALTS, parseStoredHalt, type RotationHalt, type RotationStore } from './rotation-store.ts';

/** Pages a listing reads at most. */
const MAX_PAGES = 20;

export class DynamoDbRotationStore implements RotationStore, KeyBaselineStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(options: { client: DynamoDBClient; table: string }) {
    this.client = options.client;
    this.table = options.table;
  }

  async releasedWave(rotation: string): Promise<number> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'waves'), ConsistentRead: true }));
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

  async halt(halt: RotationHalt): Promise<void> {
    // The lookup items first: a halt is never visible without them, and a retry rewrites the same items.
    for (const identity of new Set(halt.changes)) await this.client.send(new PutItemCommand({ TableName: this.table, Item: key(`halted#${identityKey(identity)}`, halt.rotation) }));
    await this.client.send(new PutItemCommand({ TableName: this.table, Item: { ...key(`rotation#${halt.rotation}`, 'halt'), haltedAt: { S: halt.haltedAt }, record: { S: JSON.stringify(halt) } } }));
  }

  async haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]> {
    const rotations = new Set<string>();
    for (const identity of new Set(changeIdentities)) {
      const out = await this.client.send(new QueryCommand({ TableName: this.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: `halted#${identityKey(identity)}` } }, ConsistentRead: true, Limit: 100 }));
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
      const out = await this.client.send(new ScanCommand({ TableName: this.table, FilterExpression: 'sk = :halt', ExpressionAttributeValues: { ':halt': { S: 'halt' } }, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }));
      for (const item of out.Items ?? []) {
        const halt = item.record?.S ? parseStoredHalt(item.record.S) : undefined;
        if (halt) halts.push(halt);
      }
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    return halts.sort((a, b) => a.haltedAt.localeCompare(b.haltedAt)).slice(0, MAX_LISTED_HALTS);
  }

  async clear(rotation: string): Promise<RotationHalt | undefined> {
    const halt = await this.read(rotation);
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'halt') }));
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'waves') }));
    for (const identity of new Set(halt?.changes ?? [])) await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`halted#${identityKey(identity)}`, rotation) }));
    return halt;
  }

  async baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: key(`keys#${pathKey(path)}`, device), ConsistentRead: true }));
    // DynamoDB's TTL removes items late (up to days): an expired item is no baseline.
    if (!out.Item?.record?.S || Number(out.Item.ttl?.N ?? 0) * 1000 <= nowMs) return undefined;
    return parseStoredBaseline(out.Item.record.S, device);
  }

  async putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: { ...key(`keys#${pathKey(path)}`, baseline.device), version: { N: String(baseline.version) }, record: { S: storedBaseline(baseline) }, ttl: { N: String(Math.ceil(expiresAtMs / 1000)) } },
          // Versions only move forward: an older write's baseline, arriving late, never replaces a newer one.
          ConditionExpression: 'attribute_not_exists(#version) OR #version < :v OR #ttl <= :now',
          ExpressionAttributeNames: { '#version': 'version', '#ttl': 'ttl' },
          ExpressionAttributeValues: { ':v': { N: String(baseline.version) }, ':now': { N: String(Math.floor(nowMs / 1000)) } },
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
    const out = await this.client.send(new QueryCommand({ TableName: this.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: `keys#${pathKey(path)}` } }, ConsistentRead: true, Limit: 100 }));
    for (const item of out.Items ?? []) if (item.sk?.S) await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key(`keys#${pathKey(path)}`, item.sk.S) }));
  }

  private async read(rotation: string): Promise<RotationHalt | undefined> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: key(`rotation#${rotation}`, 'halt'), ConsistentRead: true }));
    return out.Item?.record?.S ? parseStoredHalt(out.Item.record.S) : undefined;
  }
}

const key = (pk: string, sk: string): Record<string, AttributeValue> => ({ pk: { S: pk }, sk: { S: sk } });
