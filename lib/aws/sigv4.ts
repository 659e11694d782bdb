/** The one SigV4 signer set-up: EKS tokens (presigned STS), Vault's aws login (signed STS) and the relay's requests. */
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentials, AwsCredentialsProvider } from './credentials.ts';

export const sigV4 = (
  credentials: AwsCredentials | AwsCredentialsProvider,
  region: string,
  service: string,
): SignatureV4 => new SignatureV4({ credentials, region, service, sha256: Hash.bind(null, 'sha256') });
