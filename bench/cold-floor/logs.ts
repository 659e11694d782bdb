/**
 * The floor of the CloudWatch Logs function's cold start: its third-party parts alone. The subscription payload is
 * gunzipped and parsed with zod (as the intake does); the AWS SDK clients lib/runtime/lambda.ts builds at start are
 * built, with Powertools' Logger and Metrics. bench/bundle-bench.ts bundles it with serverless.yml's esbuild settings
 * and starts it like the real function.
 */
import { gunzipSync } from 'node:zlib';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { z } from 'zod';

const region = process.env.AWS_REGION;
const telemetry = [new Logger({ serviceName: 'floor' }), new Metrics({ serviceName: 'floor', namespace: 'Floor' })];
const clients = [new SQSClient({ region }), new SSMClient({ region }), new DynamoDBClient({ region })];
const Payload = z.object({ messageType: z.string(), logEvents: z.array(z.object({ message: z.string() })) });

export function handler(event: { awslogs: { data: string } }): { messages: number; clients: number } {
  const payload = Payload.parse(JSON.parse(gunzipSync(Buffer.from(event.awslogs.data, 'base64')).toString('utf8')));
  return { messages: payload.logEvents.length, clients: clients.length + telemetry.length };
}
