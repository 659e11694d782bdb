/**
 * SigV4 for a Lambda Function URL with `AuthType: AWS_IAM` (serverless.yml's `httpAuth: iam`): the relay signs each
 * POST with its host's AWS credentials (the SDK's default chain: environment, profile, instance or task role),
 * service `lambda`, the region of the URL. The body is hashed into the signature and sent as x-amz-content-sha256,
 * so neither the batch nor the headers can be changed on the way. Credentials never reach a log line.
 */
import { HttpRequest } from '@smithy/protocol-http';
import type { AwsCredentialsProvider } from './credentials.ts';
import { sigV4 } from './sigv4.ts';

/** `<url-id>.lambda-url.<region>.on.aws`: a Lambda Function URL, and its region. */
const FUNCTION_URL_HOST = /^[a-z0-9]+\.lambda-url\.([a-z0-9-]+)\.on\.aws$/;

/** The region of a Lambda Function URL host, or undefined when the host is not one. */
export function functionUrlRegion(hostname: string): string | undefined {
  return FUNCTION_URL_HOST.exec(hostname.toLowerCase())?.[1];
}

export interface OutgoingRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

/** Adds authentication headers to a request about to be sent (returns the headers to send). */
export type RequestSigner = (request: OutgoingRequest) => Promise<Record<string, string>>;

export function sigV4Signer(options: {
  region: string;
  credentials: AwsCredentialsProvider;
  service?: string;
  now?: () => number;
}): RequestSigner {
  const signer = sigV4(options.credentials, options.region, options.service ?? 'lambda');
  return async ({ url, method, headers, body }) => {
    const target = new URL(url);
    const query: Record<string, string> = {};
    for (const [name, value] of target.searchParams) query[name] = value;
    const unsigned = new HttpRequest({
      method,
      protocol: target.protocol,
      hostname: target.hostname,
      ...(target.port ? { port: Number(target.port) } : {}),
      path: target.pathname,
      query,
      headers: { ...headers, host: target.host },
      body,
    });
    const signed = await signer.sign(unsigned, { signingDate: new Date(options.now?.() ?? Date.now()) });
    // fetch sets Host itself, from the URL: the same value that was signed.
    const { host: _host, ...out } = signed.headers;
    return out;
  };
}
