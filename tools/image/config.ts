/**
 * What the container image of the `vault-rollout` CLI (serve, worker, relay) is, apart from its bytes: paths, user,
 * entrypoint, environment, port and labels. tools/image/build.ts writes it into the OCI image config;
 * tools/image/Dockerfile says the same for Docker users, and test/unit/tools/image-dockerfile.test.ts keeps the two
 * equal. Pure: no I/O.
 */

/** The unprivileged user and group the image runs as (distroless's `nonroot`). */
export const RUNTIME_UID = 65532;
export const RUNTIME_GID = 65532;
export const RUNTIME_USER = 'nonroot';

export const NODE_PATH = '/usr/local/bin/node';
export const APP_DIR = '/app';
export const APP_BUNDLE = `${APP_DIR}/vault-rollout.mjs`;
/**
 * The CLI on the image's PATH: a symbolic link to the bundle, which starts with a `#!` line naming NODE_PATH, so that
 * `kubectl exec POD -- vault-rollout doctor` runs with no shell in the image (the kernel reads the `#!` line; Node
 * resolves the link and loads the bundle as the ES module its `.mjs` name says). Also the Entrypoint.
 */
export const CLI_PATH = '/usr/local/bin/vault-rollout';
/** The one writable place: HOME and XDG_STATE_HOME (serve's queue, the rotation store); mount a volume here. */
export const STATE_DIR = '/var/lib/vault-rollout';
/**
 * Where Cmd expects the routing table: a file in a directory of its own, so that a ConfigMap mounted as that
 * directory (the Helm chart's) or a bind mount of the file puts it there; the chart passes the same path.
 */
export const ROUTES_FILE = '/etc/vault-rollout/routes/routes.yaml';
export const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
export const SERVE_PORT = 8787;

/**
 * The bundle as the image holds it, executable on its own: its first line `#!` NODE_PATH. esbuild keeps main.ts's
 * `#!/usr/bin/env node`, which the image cannot run (it has no /usr/bin/env): that line is replaced.
 */
export function executableBundle(bundle: Buffer): Buffer {
  const hashbang = Buffer.from(`#!${NODE_PATH}\n`);
  const rest = bundle.subarray(0, 2).toString() === '#!' ? bundle.subarray(bundle.indexOf(0x0a) + 1) : bundle;
  return Buffer.concat([hashbang, rest]);
}

export interface ImageRuntimeConfig {
  User: string;
  Entrypoint: string[];
  Cmd: string[];
  WorkingDir: string;
  Env: string[];
  ExposedPorts: Record<string, Record<string, never>>;
  Labels: Record<string, string>;
}

export interface ImageProvenance {
  /** package.json's version. */
  version: string;
  /** The git commit the image is built from (with `-dirty` when the work tree had changes). */
  revision: string;
  /** The commit's time, in seconds (SOURCE_DATE_EPOCH): the image's `created`, so that a rebuild is byte-identical. */
  sourceDateEpoch: number;
  license: string;
  description: string;
  /** Where the source lives (org.opencontainers.image.source); the label is left out when unknown. */
  source?: string;
}

export const IMAGE_TITLE = 'vault-rollout';

export const createdAt = (sourceDateEpoch: number): string =>
  new Date(sourceDateEpoch * 1000).toISOString().replace('.000Z', 'Z');

/** The labels; only those that name the build (version, revision, created) vary from one build to the next. */
export function imageLabels(p: ImageProvenance): Record<string, string> {
  return {
    'org.opencontainers.image.created': createdAt(p.sourceDateEpoch),
    'org.opencontainers.image.description': p.description,
    'org.opencontainers.image.licenses': p.license,
    'org.opencontainers.image.revision': p.revision,
    ...(p.source ? { 'org.opencontainers.image.source': p.source } : {}),
    'org.opencontainers.image.title': IMAGE_TITLE,
    'org.opencontainers.image.version': p.version,
  };
}

/**
 * Cmd serves on every interface of the pod with the routing table at ROUTES_FILE; serve refuses to start without
 * VAULT_ROLLOUT_WEBHOOK_SECRET or VAULT_ROLLOUT_WEBHOOK_TOKEN there (docs/how-to/run-serve.md).
 * `worker` and `relay` are other Cmds of the same Entrypoint, and every other command runs as `vault-rollout …`.
 */
export function imageRuntimeConfig(p: ImageProvenance): ImageRuntimeConfig {
  return {
    User: `${RUNTIME_UID}:${RUNTIME_GID}`,
    Entrypoint: [CLI_PATH],
    Cmd: ['serve', '--host', '0.0.0.0', '--port', String(SERVE_PORT), '--routes', ROUTES_FILE],
    WorkingDir: STATE_DIR,
    Env: [
      'PATH=/usr/local/bin',
      'NODE_ENV=production',
      `HOME=${STATE_DIR}`,
      `XDG_STATE_HOME=${STATE_DIR}`,
      // For OpenSSL-style consumers; Node itself verifies TLS against the Mozilla roots built into it, and
      // NODE_EXTRA_CA_CERTS adds a private CA.
      `SSL_CERT_FILE=${CA_BUNDLE}`,
    ],
    ExposedPorts: { [`${SERVE_PORT}/tcp`]: {} },
    Labels: imageLabels(p),
  };
}
