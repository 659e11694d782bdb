/**
 * The floor of the worker function's cold start: its third-party parts alone. zod parses each queue message (as
 * lib/queue/rollout-message.ts does); the AWS SDK clients the worker builds (SQS, DynamoDB, EKS with STS for EKS
 * clusters, SSM and Secrets Manager for kubeconfigs kept there) are built; client-node's KubeConfig is loaded from a
 * small document, as every cluster's credentials are; Powertools' Logger and Metrics too. bench/bundle-bench.ts
 * bundles it with serverless.yml's esbuild settings and starts it like the real function.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EKSClient } from '@aws-sdk/client-eks';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { SQSClient } from '@aws-sdk/client-sqs';
import { STSClient } from '@aws-sdk/client-sts';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';

const region = process.env.AWS_REGION;
const telemetry = [new Logger({ serviceName: 'floor' }), new Metrics({ serviceName: 'floor', namespace: 'Floor' })];
const clients = [
  new SQSClient({ region }),
  new DynamoDBClient({ region }),
  new EKSClient({ region }),
  new STSClient({ region }),
  new SSMClient({ region }),
  new SecretsManagerClient({ region }),
];
const Message = z.object({ body: z.string() });

export function handler(event: { Records: unknown[] }): { batchItemFailures: never[]; clients: number } {
  for (const record of event.Records) Message.parse(record);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: false }],
    users: [{ name: 'u', token: 'floor' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  return { batchItemFailures: [], clients: clients.length + telemetry.length + kubeConfig.getContexts().length };
}
