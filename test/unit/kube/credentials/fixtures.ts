/** Shared test material: kubeconfigs with planted secrets, a recording logger, secret checks. */
import { inspect } from 'node:util';
import { expect } from 'vitest';

/** Values planted in kubeconfigs and AWS responses; no error or log line may ever contain one. */
export const planted = {
  token: 'planted-bearer-token-5f1e0c',
  password: 'planted-password-9a7c',
  clientKeyData: Buffer.from('planted-client-key-3b2d').toString('base64'),
  secretAccessKey: 'planted/secret+access+key/EXAMPLE0000',
  assumedSecretAccessKey: 'planted/assumed+secret/EXAMPLE1111',
  sessionToken: 'planted-session-token-77aa',
} as const;

export const CA_DATA = Buffer.from('-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n').toString(
  'base64',
);

interface KubeconfigOptions {
  server?: string | null;
  currentContext?: string | null;
  user?: Record<string, unknown>;
  extraContexts?: string;
  insecure?: boolean;
}

/** A kubeconfig with contexts `main` (user admin: token + client key) and `other` (user other: basic auth). */
export function kubeconfigYaml(options: KubeconfigOptions = {}): string {
  const server = options.server === undefined ? 'https://api.main.example:6443' : options.server;
  const user = options.user ?? { token: planted.token, 'client-key-data': planted.clientKeyData };
  const userYaml = Object.entries(user)
    .map(([key, value]) => `      ${key}: ${JSON.stringify(value)}`)
    .join('\n');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: main',
    '    cluster:',
    server === null ? '' : `      server: ${server}`,
    `      certificate-authority-data: ${CA_DATA}`,
    options.insecure === true ? '      insecure-skip-tls-verify: true' : '',
    '  - name: other',
    '    cluster: { server: "https://api.other.example:6443" }',
    'contexts:',
    '  - name: main',
    '    context: { cluster: main, user: admin, namespace: payments }',
    '  - name: other',
    '    context: { cluster: other, user: other }',
    options.extraContexts ?? '',
    'users:',
    '  - name: admin',
    '    user:',
    userYaml,
    '  - name: other',
    `    user: { username: bob, password: ${planted.password} }`,
    options.currentContext === null ? '' : `current-context: ${options.currentContext ?? 'main'}`,
    '',
  ]
    .filter((line, i, all) => line !== '' || i === all.length - 1)
    .join('\n');
}

export interface RecordingLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
  lines: string[];
}

export function recordingLogger(): RecordingLogger {
  const lines: string[] = [];
  return { lines, warn: (message, fields) => void lines.push(JSON.stringify({ message, ...fields })) };
}

/** Fails when any planted secret (or an extra one) appears in the error, its causes, or the logged lines. */
export function expectNoSecrets(error: unknown, lines: readonly string[], extra: readonly string[] = []): void {
  const text = [inspect(error, { depth: 10 }), String(error), ...lines].join('\n');
  for (const secret of [...Object.values(planted), ...extra]) {
    expect(text, `leaked ${secret.slice(0, 12)}…`).not.toContain(secret);
  }
}

/** The rejection of a promise, failing the test when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    return error as Error;
  }
  throw new Error('expected a rejection, got a value');
}

/** An AWS-SDK-shaped service error whose message names the resource, as AWS's do. */
export function awsError(name: string, message: string): Error {
  return Object.assign(new Error(message), { name, $metadata: { httpStatusCode: 400 } });
}
