/**
 * The one reader of secrets kept in AWS: an SSM parameter (decrypted) or a Secrets Manager secret string. Callers say
 * what a missing value means; the value itself is never logged.
 */
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';

export const ssmParameterValue = async (ssm: Pick<SSMClient, 'send'>, name: string): Promise<string | undefined> =>
  (await ssm.send(new GetParameterCommand({ Name: name, WithDecryption: true }))).Parameter?.Value;

export const secretStringValue = async (
  secretsManager: Pick<SecretsManagerClient, 'send'>,
  id: string,
): Promise<string | undefined> => (await secretsManager.send(new GetSecretValueCommand({ SecretId: id }))).SecretString;
