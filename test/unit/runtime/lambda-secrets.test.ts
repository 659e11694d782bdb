/** The HTTP function's intake secrets from SSM: one shorter than 32 characters is refused (fail closed), never used. */
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { lambdaRuntime } from '../../../lib/runtime/lambda.ts';
import { repoRoot } from '../../helpers.ts';
import { BEARER_TOKEN } from '../../secrets.ts';

const ssm = mockClient(SSMClient);
afterEach(() => ssm.reset());
const env = {
  VAULT_ROLLOUT_ROUTES: 'infra/routes/example.yaml',
  VAULT_ROLLOUT_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/vr.fifo',
  LAMBDA_TASK_ROOT: repoRoot,
  VAULT_ROLLOUT_AUTH: 'bearer',
  VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM: '/vr/token',
  AWS_REGION: 'eu-west-1',
  POWERTOOLS_METRICS_DISABLED: 'true',
  POWERTOOLS_LOG_LEVEL: 'SILENT',
};

describe("the HTTP function's secrets", () => {
  it('refuse a bearer token shorter than 32 characters, naming the parameter, and take it once it is long', async () => {
    ssm.on(GetParameterCommand).resolves({ Parameter: { Value: 'guessable-token' } });
    const runtime = lambdaRuntime(env);
    const error = await runtime
      .appDeps()
      .secrets()
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error?.message).toBe(
      'the parameter VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM names is 15 characters, fewer than 32: a short secret can be guessed; make one with openssl rand -hex 32',
    );
    ssm.on(GetParameterCommand).resolves({ Parameter: { Value: BEARER_TOKEN } });
    expect(await runtime.appDeps().secrets()).toEqual({ bearerToken: BEARER_TOKEN });
  });
});
