/**
 * The floor of the HTTP function's cold start: the third-party parts it is made of, with none of vault-rollout's
 * own code. hono answers the request through its Lambda adapter (as lib/http/app.ts does), zod parses a body (the
 * trust boundary's library), the three AWS SDK clients lib/runtime/lambda.ts builds at start are built here too, and
 * so are Powertools' Logger and Metrics (lib/observability/powertools.ts). bench/bundle-bench.ts bundles it with
 * serverless.yml's esbuild settings and starts it like the real function.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Hono } from 'hono';
import { handle } from 'hono/aws-lambda';
import { z } from 'zod';

const region = process.env.AWS_REGION;
const telemetry = [new Logger({ serviceName: 'floor' }), new Metrics({ serviceName: 'floor', namespace: 'Floor' })];
const clients = [new SQSClient({ region }), new SSMClient({ region }), new DynamoDBClient({ region })];
const Health = z.strictObject({ ok: z.boolean(), clients: z.number().int() });
const app = new Hono();
app.get('/healthz', (c) => c.json(Health.parse({ ok: true, clients: clients.length + telemetry.length })));

export const handler = handle(app);
