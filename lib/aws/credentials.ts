/**
 * AWS credentials as vault-rollout uses them (EKS tokens, SigV4 requests, Vault's aws login): the shape the AWS SDK's
 * credential providers return.
 */

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}
export type AwsCredentialsProvider = () => Promise<AwsCredentials>;
