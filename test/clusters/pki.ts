// Certificates for the local test clusters: one CA per cluster, an API-server
// serving certificate and client certificates, made with the openssl CLI
// (node:crypto makes keys but cannot sign X.509 certificates).
// Keys are EC P-256: instant to generate and supported by Go and Node TLS.
// Nothing here prints key material.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface KeyPairFiles {
  keyFile: string;
  pubFile: string;
}

export interface CertFiles {
  certFile: string;
  keyFile: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`openssl ${args[0] ?? ''} failed: ${stderr.trim() || String(err)}`, { cause: err });
  }
}

/** Writes an EC P-256 key pair (PKCS#8 private key, SPKI public key), mode 0600 for the key. */
export function writeKeyPair(dir: string, name: string): KeyPairFiles {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: 'P-256',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const keyFile = join(dir, `${name}.key`);
  const pubFile = join(dir, `${name}.pub`);
  writeFileSync(keyFile, privateKey, { mode: 0o600 });
  writeFileSync(pubFile, publicKey, { mode: 0o644 });
  return { keyFile, pubFile };
}

// A config of our own so the result does not depend on the system openssl.cnf.
function writeConfig(dir: string, name: string, extensions: string[]): string {
  const file = join(dir, `${name}.cnf`);
  writeFileSync(
    file,
    ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', '[ext]', ...extensions, ''].join('\n'),
  );
  return file;
}

function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive
  return `0x${bytes.toString('hex')}`;
}

/** A self-signed CA certificate (10 years) with its key, as <name>.crt / <name>.key. */
export function writeCa(dir: string, commonName: string, name = 'ca'): CertFiles {
  const { keyFile, pubFile } = writeKeyPair(dir, name);
  rmSync(pubFile);
  const certFile = join(dir, `${name}.crt`);
  const cnf = writeConfig(dir, name, [
    'basicConstraints = critical, CA:TRUE',
    'keyUsage = critical, keyCertSign, cRLSign, digitalSignature',
    'subjectKeyIdentifier = hash',
  ]);
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      keyFile,
      '-subj',
      `/CN=${commonName}`,
      '-days',
      '3650',
      '-set_serial',
      serial(),
      '-config',
      cnf,
      '-extensions',
      'ext',
      '-out',
      certFile,
    ],
    dir,
  );
  rmSync(cnf);
  return { certFile, keyFile };
}

export interface IssueOptions {
  /** File name stem: <name>.crt / <name>.key. */
  name: string;
  commonName: string;
  organizations?: string[];
  /** Subject alternative names, e.g. ['IP:127.0.0.1', 'DNS:localhost']. */
  sans?: string[];
  usage: 'server' | 'client';
  days?: number;
}

/** A leaf certificate signed by the CA in `ca`. */
export function issueCert(dir: string, ca: CertFiles, opts: IssueOptions): CertFiles {
  const { keyFile, pubFile } = writeKeyPair(dir, opts.name);
  rmSync(pubFile);
  const csr = join(dir, `${opts.name}.csr`);
  const certFile = join(dir, `${opts.name}.crt`);
  const subject = (opts.organizations ?? []).map((o) => `/O=${o}`).join('') + `/CN=${opts.commonName}`;
  const ext = [
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature, keyEncipherment',
    `extendedKeyUsage = ${opts.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
    'subjectKeyIdentifier = hash',
    'authorityKeyIdentifier = keyid',
  ];
  if (opts.sans && opts.sans.length > 0) ext.push(`subjectAltName = ${opts.sans.join(', ')}`);
  const cnf = writeConfig(dir, opts.name, ext);
  openssl(['req', '-new', '-key', keyFile, '-subj', subject, '-config', cnf, '-out', csr], dir);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.certFile,
      '-CAkey',
      ca.keyFile,
      '-set_serial',
      serial(),
      '-days',
      String(opts.days ?? 365),
      '-extfile',
      cnf,
      '-extensions',
      'ext',
      '-out',
      certFile,
    ],
    dir,
  );
  rmSync(csr);
  rmSync(cnf);
  return { certFile, keyFile };
}

function b64(file: string): string {
  return readFileSync(file).toString('base64');
}

/** A kubeconfig of one cluster and one client-certificate user (the files' contents inline). */
export function writeKubeconfig(
  file: string,
  name: string,
  server: string,
  caFile: string,
  user: string,
  creds: CertFiles,
): void {
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `  - name: ${name}`,
    '    cluster:',
    `      server: ${server}`,
    `      certificate-authority-data: ${b64(caFile)}`,
    'users:',
    `  - name: ${user}`,
    '    user:',
    `      client-certificate-data: ${b64(creds.certFile)}`,
    `      client-key-data: ${b64(creds.keyFile)}`,
    'contexts:',
    `  - name: ${name}`,
    '    context:',
    `      cluster: ${name}`,
    `      user: ${user}`,
    `current-context: ${name}`,
    '',
  ].join('\n');
  writeFileSync(file, text, { mode: 0o600 });
}
