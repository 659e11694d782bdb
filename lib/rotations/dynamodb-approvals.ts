/**
 * Approvals in the DynamoDB rotation table (lib/rotations/approvals.ts), beside the rotation's other items:
 *   rotation#<key> / approval#<wave>   record: the request as JSON; since; approvedBy, approvedAt once approved
 * The request is a conditional put (the first stays); an approval is an update conditioned on the request being there
 * and not approved yet, so `approve` never creates a request and the first approval stays.
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
import { ignoreConditionFailed, key, MAX_PAGES } from './dynamodb-items.ts';
import {
  MAX_LISTED_APPROVALS,
  parseStoredApproval,
  storedRequest,
  type ApprovalRecord,
  type ApprovalRequest,
  type ApprovalStore,
} from './approvals.ts';

const APPROVAL = 'approval#';
const fromItem = (item: Record<string, AttributeValue> | undefined): ApprovalRecord | undefined =>
  item?.record?.S === undefined
    ? undefined
    : parseStoredApproval(item.record.S, item.approvedBy?.S, item.approvedAt?.S);

export class DynamoDbApprovalStore implements ApprovalStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(options: { client: DynamoDBClient; table: string }) {
    this.client = options.client;
    this.table = options.table;
  }

  async request(request: ApprovalRequest): Promise<ApprovalRecord> {
    const item = {
      ...key(`rotation#${request.rotation}`, `${APPROVAL}${request.wave}`),
      record: { S: storedRequest(request) },
      since: { S: request.since },
    };
    await this.client
      .send(new PutItemCommand({ TableName: this.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }))
      .catch(ignoreConditionFailed);
    return (await this.get(request.rotation, request.wave)) ?? request;
  }

  async get(rotation: string, wave: number): Promise<ApprovalRecord | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: key(`rotation#${rotation}`, `${APPROVAL}${wave}`),
        ConsistentRead: true,
      }),
    );
    return fromItem(out.Item);
  }

  async ofRotation(rotation: string): Promise<ApprovalRecord[]> {
    // At most one item per wave (the table allows 20 waves): one page.
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :approval)',
        ExpressionAttributeValues: { ':pk': { S: `rotation#${rotation}` }, ':approval': { S: APPROVAL } },
        ConsistentRead: true,
      }),
    );
    return (out.Items ?? []).flatMap((item) => fromItem(item) ?? []).sort((a, b) => a.wave - b.wave);
  }

  async approve(rotation: string, wave: number, by: string, at: string): Promise<ApprovalRecord | undefined> {
    await this.client
      .send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(`rotation#${rotation}`, `${APPROVAL}${wave}`),
          UpdateExpression: 'SET approvedBy = :by, approvedAt = :at',
          ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(approvedAt)',
          ExpressionAttributeValues: { ':by': { S: by }, ':at': { S: at } },
        }),
      )
      .catch(ignoreConditionFailed);
    return this.get(rotation, wave);
  }

  async pending(): Promise<ApprovalRecord[]> {
    const found: ApprovalRecord[] = [];
    let start: Record<string, AttributeValue> | undefined;
    for (let page = 0; page < MAX_PAGES && found.length < MAX_LISTED_APPROVALS; page++) {
      const out = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          FilterExpression: 'begins_with(sk, :approval) AND attribute_not_exists(approvedAt)',
          ExpressionAttributeValues: { ':approval': { S: APPROVAL } },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const record = fromItem(item);
        if (record) found.push(record);
      }
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    return found.sort((a, b) => a.since.localeCompare(b.since)).slice(0, MAX_LISTED_APPROVALS);
  }

  async forget(rotation: string): Promise<void> {
    for (const record of await this.ofRotation(rotation))
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: key(`rotation#${rotation}`, `${APPROVAL}${record.wave}`),
        }),
      );
  }
}
