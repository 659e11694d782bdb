/**
 * What the Lambda functions share, built once per container (module scope) and reused by every invocation:
 * the routing table, the queue client, telemetry, and the webhook secrets read from SSM Parameter Store on first
 * use. Cluster access lives in lambda-worker.ts, so the http and logs bundles carry no Kubernetes code.
 */
import { secretsProblem } from '../http/status-auth.ts';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SSMClient } from '@aws-sdk/client-ssm';
import { ssmParameterValue } from '../aws/parameter-store.ts';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { AppDeps } from '../http/app.ts';
import type { WebhookSecrets } from '../http/webhook-auth.ts';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import type { Telemetry } from '../kernel/telemetry.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import { DynamoDbRotationStore } from '../rotations/dynamodb-rotation-store.ts';
import type { KeyBaselineStore } from '../rotations/key-baselines.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { authModes, ConfigError, loadRoutesFromEnv, required, type Env } from './config.ts';

export interface LambdaRuntime {
  table: RoutingTable;
  /** Where the routing table was read from: kubeconfig files are relative to it. */
  routesFile: string;
  env: Env;
  telemetry: Telemetry;
  appDeps(): AppDeps;
  intakeDeps(): { table: RoutingTable; queue: SqsRolloutQueue; now: () => number; baselines?: KeyBaselineStore };
}

async function ssmSecret(ssm: SSMClient, name: string): Promise<string> {
  const value = await ssmParameterValue(ssm, name);
  if (!value) throw new ConfigError(`SSM parameter ${name} has no value`);
  return value;
}

export function lambdaRuntime(env: Env): LambdaRuntime {
  const telemetry = powertoolsTelemetry(env.POWERTOOLS_SERVICE_NAME ?? 'vault-rollout');
  const { table, file } = loadRoutesFromEnv(env);
  const region = env.AWS_REGION;
  let queue: SqsRolloutQueue | undefined;
  const getQueue = () =>
    (queue ??= new SqsRolloutQueue({
      client: new SQSClient({ region }),
      queueUrl: required(env, 'VAULT_ROLLOUT_QUEUE_URL', 'the SQS FIFO queue URL'),
    }));
  // Key-level restarts: the intake keeps each path's key baselines in the rotation table (its role may
  // touch only the `keys#` items there: serverless.yml). Without the table every change is every key.
  const stateTable = env.VAULT_ROLLOUT_STATE_TABLE;
  let baselines: KeyBaselineStore | undefined;
  const getBaselines = (): { baselines?: KeyBaselineStore } =>
    stateTable
      ? {
          baselines: (baselines ??= new DynamoDbRotationStore({
            client: new DynamoDBClient({ region }),
            table: stateTable,
          })),
        }
      : {};

  let secrets: Promise<WebhookSecrets> | undefined;
  const loadSecrets = (): Promise<WebhookSecrets> => webhookSecrets(env, region);

  return {
    table,
    routesFile: file,
    env,
    telemetry,
    appDeps: () => ({
      table,
      queue: getQueue(),
      telemetry,
      ...getBaselines(),
      // A failed read is not kept: the next request tries again.
      secrets: () =>
        (secrets ??= loadSecrets().catch((e: unknown) => {
          secrets = undefined;
          throw e;
        })),
    }),
    intakeDeps: () => ({ table, queue: getQueue(), now: Date.now, ...getBaselines() }),
  };
}

/** The intake's secrets per its auth modes: none for IAM, else HMAC secret and/or bearer token read from SSM. */
async function webhookSecrets(env: Env, region: string | undefined): Promise<WebhookSecrets> {
  const modes = authModes(env);
  if (modes.has('iam')) return { iam: true };
  const ssm = new SSMClient({ region });
  const out: WebhookSecrets = {};
  if (modes.has('hmac'))
    out.hmacSecret = await ssmSecret(
      ssm,
      required(env, 'VAULT_ROLLOUT_WEBHOOK_SECRET_SSM', 'the SSM parameter of the HMAC secret'),
    );
  if (modes.has('bearer'))
    out.bearerToken = await ssmSecret(
      ssm,
      required(env, 'VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM', 'the SSM parameter of the bearer token'),
    );
  // A short secret is refused, not used: every request fails (closed) until the parameter holds a long one.
  const problem = secretsProblem(out);
  if (problem !== undefined) {
    throw new Error(problem.replace(/^(VAULT_ROLLOUT_WEBHOOK_(?:SECRET|TOKEN))/, 'the parameter $1_SSM names'));
  }
  return out;
}
