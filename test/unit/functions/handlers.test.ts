/**
 * The Lambda handlers with real event shapes (API Gateway HTTP API v2, Function URL with a base64 body, CloudWatch
 * Logs with a control message); AWS services through aws-sdk-client-mock (the SQS path against an emulator is in
 * test/integration/sqs-queue.test.ts, the worker against a real cluster in test/integration/functions.test.ts).
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import {
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyResultV2, CloudWatchLogsEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { handler as httpHandler } from '../../../functions/http.ts';
import { readRepoFile, repoRoot } from '../../helpers.ts';
import { BEARER_TOKEN } from '../../secrets.ts';

const sqs = mockClient(SQSClient);
const ssm = mockClient(SSMClient);
const TOKEN = BEARER_TOKEN;
const saved = { ...process.env };
const demo = readRepoFile('test/fixtures/demo/rotation.ndjson');
const event = <T>(name: string): T => JSON.parse(readFileSync(`${repoRoot}test/events/lambda/${name}`, 'utf8')) as T;

beforeAll(() => {
  Object.assign(process.env, {
    VAULT_ROLLOUT_ROUTES: 'infra/routes/example.yaml',
    LAMBDA_TASK_ROOT: repoRoot,
    VAULT_ROLLOUT_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout-dev.fifo',
    VAULT_ROLLOUT_AUTH: 'bearer',
    VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM: '/vault-rollout/dev/webhook-token',
    AWS_REGION: 'eu-west-1',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
  });
});
afterAll(() => {
  process.env = saved;
});
beforeEach(() => {
  sqs.reset();
  ssm.reset();
  ssm
    .on(GetParameterCommand, { Name: '/vault-rollout/dev/webhook-token', WithDecryption: true })
    .resolves({ Parameter: { Value: TOKEN } });
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
    Successful: input.Entries.map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
});

type Result = Exclude<APIGatewayProxyResultV2, string>;
/** The event type hono/aws-lambda's handle() takes. */
type HttpEvent = Parameters<typeof httpHandler>[0] & {
  body: string | null;
  headers: Record<string, string | undefined>;
};

describe('functions/http', () => {
  it('takes an HTTP API v2 event: 202, one message per cluster, grouped by cluster', async () => {
    const { handler } = await import('../../../functions/http.ts');
    const e = event<HttpEvent>('http-api-v2.json');
    e.body = demo;
    e.headers.authorization = `Bearer ${TOKEN}`;
    const res = (await handler(e, {} as never)) as Result;
    expect(res.statusCode).toBe(202);
    expect(JSON.parse(res.body ?? '')).toMatchObject({ accepted: 5, ignored: 1, rejected: 0, queued: 3 });
    const entries = sqs.commandCalls(SendMessageBatchCommand).flatMap((c) => c.args[0].input.Entries ?? []);
    expect(entries.map((e2) => e2.MessageGroupId).sort()).toEqual(['alpha', 'beta', 'gamma']);
    expect(entries.every((e2) => /^[0-9a-f]{64}$/.test(e2.MessageDeduplicationId ?? ''))).toBe(true);
  });

  it('takes a Function URL event with a base64 body and no Content-Type (OpenBao http audit device)', async () => {
    const { handler } = await import('../../../functions/http.ts');
    const e = event<HttpEvent>('function-url.json');
    e.body = Buffer.from(readFileSync(`${repoRoot}test/events/openbao-http/kvv2-write.json`)).toString('base64');
    e.headers.authorization = `Bearer ${TOKEN}`;
    const res = (await handler(e, {} as never)) as Result;
    expect(res.statusCode).toBe(202);
    expect(JSON.parse(res.body ?? '')).toMatchObject({ accepted: 1, rejected: 0 });
  });

  it('answers 401 without the token and 503 when SQS is unavailable', async () => {
    const { handler } = await import('../../../functions/http.ts');
    const e = event<HttpEvent>('http-api-v2.json');
    e.body = demo;
    expect(((await handler(e, {} as never)) as Result).statusCode).toBe(401);
    sqs.on(SendMessageBatchCommand).rejects(Object.assign(new Error('connect ECONNREFUSED'), { name: 'TimeoutError' }));
    e.headers.authorization = `Bearer ${TOKEN}`;
    expect(((await handler(e, {} as never)) as Result).statusCode).toBe(503);
  });
});

describe('functions/logs', () => {
  const envelope = (doc: unknown): CloudWatchLogsEvent => ({
    awslogs: { data: gzipSync(JSON.stringify(doc)).toString('base64') },
  });

  it('queues the changes of a data message', async () => {
    const { handler } = await import('../../../functions/logs.ts');
    const lines = demo.trim().split('\n');
    const out = await handler(
      envelope({
        messageType: 'DATA_MESSAGE',
        owner: '123456789012',
        logGroup: '/vault/audit',
        logStream: 'i-0abc',
        subscriptionFilters: ['vault-rollout'],
        logEvents: lines.map((message, i) => ({ id: String(i), timestamp: 1795169705000 + i, message })),
      }),
    );
    expect(out).toEqual({ accepted: 5, ignored: 1, rejected: 0, queued: 3 });
  });

  it('ignores a control message and queues nothing', async () => {
    const { handler } = await import('../../../functions/logs.ts');
    const out = await handler(
      envelope({
        messageType: 'CONTROL_MESSAGE',
        owner: 'CloudwatchLogs',
        logGroup: '',
        logStream: '',
        subscriptionFilters: [],
        logEvents: [
          {
            id: '',
            timestamp: 1795169705000,
            message: 'CWL CONTROL MESSAGE: Checking health of destination Firehose.',
          },
        ],
      }),
    );
    expect(out).toEqual({ accepted: 0, ignored: 1, rejected: 0, queued: 0 });
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
  });

  it('fails the invocation when the queue is unavailable, so Lambda retries it', async () => {
    const { handler } = await import('../../../functions/logs.ts');
    sqs.on(SendMessageBatchCommand).rejects(new Error('throttled'));
    await expect(
      handler(
        envelope({
          messageType: 'DATA_MESSAGE',
          logEvents: [{ id: '1', timestamp: 1, message: demo.split('\n')[0] ?? '' }],
        }),
      ),
    ).rejects.toThrow();
  });
});

describe('VAULT_ROLLOUT_AUTH fails closed', () => {
  it.each([
    ['', 'it is empty'],
    ['hmac,iam', 'iam (the Function URL authenticates the caller) cannot be combined with hmac or bearer'],
    ['hmac,basic', 'it is not one of the documented values'],
    ['none', 'it is not one of the documented values'],
  ])('refuses every request when it is %j, and logs why', async (value, why) => {
    const { authModes } = await import('../../../lib/runtime/config.ts');
    expect(() => authModes({ VAULT_ROLLOUT_AUTH: value })).toThrow(
      `VAULT_ROLLOUT_AUTH is not valid: ${why}; use hmac, bearer, hmac,bearer or iam (every request is refused until it is fixed)`,
    );
    const { lambdaRuntime } = await import('../../../lib/runtime/lambda.ts');
    const { handle } = await import('hono/aws-lambda');
    const { buildApp } = await import('../../../lib/http/app.ts');
    const handler = handle(buildApp(lambdaRuntime({ ...process.env, VAULT_ROLLOUT_AUTH: value }).appDeps()));
    const e = event<HttpEvent>('http-api-v2.json');
    e.body = demo;
    delete e.headers.authorization;
    const res = (await handler(e, {} as never)) as Result;
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
  });

  it.each([
    [undefined, ['hmac', 'bearer']],
    ['hmac', ['hmac']],
    ['bearer', ['bearer']],
    ['hmac,bearer', ['hmac', 'bearer']],
    [' bearer , hmac ', ['hmac', 'bearer']],
    ['iam', ['iam']],
  ])('takes the documented value %j', async (value, modes) => {
    const { authModes } = await import('../../../lib/runtime/config.ts');
    expect([...authModes({ VAULT_ROLLOUT_AUTH: value })]).toEqual(modes);
  });
});

describe('key baselines: both intakes keep them in the rotation table when VAULT_ROLLOUT_STATE_TABLE is set', () => {
  const dynamodb = mockClient(DynamoDBClient);
  const hex = (c: string) => c.repeat(64);
  /** A KV v2 write of the demo's routed path as an audit device logs it: key names in clear, values HMAC'd. */
  const write = (version: number, password: string) => {
    const entry = JSON.parse(demo.split('\n')[0]?.replace(/^vault-audit: /, '') ?? '{}') as {
      request: Record<string, unknown>;
      response: { data: Record<string, unknown> };
    };
    entry.request.id = `req-${version}`;
    entry.request.data = { data: { password: `hmac-sha256:${hex(password)}`, username: `hmac-sha256:${hex('a')}` } };
    entry.response.data = { ...entry.response.data, version, deletion_time: `hmac-sha256:${hex('d')}` };
    return JSON.stringify(entry);
  };
  beforeEach(() => {
    dynamodb.reset();
    dynamodb.on(GetItemCommand).resolves({});
    dynamodb.on(PutItemCommand).resolves({});
  });

  it("http: reads the path's baseline from its device and stores the new one, keys# items only", async () => {
    const { lambdaRuntime } = await import('../../../lib/runtime/lambda.ts');
    const { handle } = await import('hono/aws-lambda');
    const { buildApp } = await import('../../../lib/http/app.ts');
    const handler = handle(
      buildApp(lambdaRuntime({ ...process.env, VAULT_ROLLOUT_STATE_TABLE: 'vault-rollout-dev-rotations' }).appDeps()),
    );
    const e = event<HttpEvent>('http-api-v2.json');
    e.body = write(3, 'b');
    e.headers.authorization = `Bearer ${TOKEN}`;
    expect(((await handler(e, {} as never)) as Result).statusCode).toBe(202);
    const gets = dynamodb.commandCalls(GetItemCommand).map((c) => c.args[0].input);
    const puts = dynamodb.commandCalls(PutItemCommand).map((c) => c.args[0].input);
    expect(gets).toHaveLength(1);
    expect(puts).toHaveLength(1);
    for (const input of [...gets, ...puts]) {
      expect(input.TableName).toBe('vault-rollout-dev-rotations');
      expect(
        (input as { Key?: { pk?: { S?: string } }; Item?: { pk?: { S?: string } } }).Key?.pk?.S ??
          (input as { Item?: { pk?: { S?: string } } }).Item?.pk?.S,
      ).toMatch(/^keys#[0-9a-f]{40}$/);
    }
    // Names and digests only: no HMAC is stored.
    expect(JSON.stringify(puts)).not.toContain(hex('b'));
    expect(dynamodb.commandCalls(QueryCommand)).toHaveLength(0);
    expect(dynamodb.commandCalls(DeleteItemCommand)).toHaveLength(0);
  });

  it('logs: the same through the CloudWatch Logs subscription', async () => {
    const { lambdaRuntime } = await import('../../../lib/runtime/lambda.ts');
    const { intake } = await import('../../../lib/pipeline/intake.ts');
    const runtime = lambdaRuntime({ ...process.env, VAULT_ROLLOUT_STATE_TABLE: 'vault-rollout-dev-rotations' });
    expect(runtime.intakeDeps().baselines).toBeDefined();
    const logs = {
      awslogs: {
        data: gzipSync(
          JSON.stringify({
            messageType: 'DATA_MESSAGE',
            logEvents: [{ id: '1', timestamp: 1, message: write(4, 'c') }],
          }),
        ).toString('base64'),
      },
    };
    const { summary } = await intake(JSON.stringify(logs), { ...runtime.intakeDeps(), format: 'cloudwatch' });
    expect(summary).toMatchObject({ accepted: 1, rejected: 0 });
    expect(dynamodb.commandCalls(GetItemCommand)).toHaveLength(1);
    expect(dynamodb.commandCalls(PutItemCommand)).toHaveLength(1);
  });

  it('without the table: no baselines, every change is every key', async () => {
    const { lambdaRuntime } = await import('../../../lib/runtime/lambda.ts');
    const env = { ...process.env };
    delete env.VAULT_ROLLOUT_STATE_TABLE;
    expect(lambdaRuntime(env).intakeDeps().baselines).toBeUndefined();
    expect(lambdaRuntime(env).appDeps().baselines).toBeUndefined();
  });
});
