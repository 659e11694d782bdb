/**
 * `vault-rollout relay`: ships Vault's change feed to the function (or straight onto the rollout queue) from
 * where Vault runs — the piece no Vault edition provides by itself. Sources: a `file` audit device's log, a
 * `socket` audit device, event notification subscriptions (Enterprise). Runs until SIGTERM/SIGINT (or the
 * optional AbortSignal, for tests), then spools what it holds, delivers for a grace period and exits 0.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { isKeyBaselineStore } from '../rotations/key-baselines.ts';
import { rotationStoreFromEnv } from '../rotations/rotation-store-from-env.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import type { BatchSender } from '../relay/batch-sender.ts';
import { HttpBatchSender } from '../relay/http-sender.ts';
import { DEFAULT_SPOOL_MAX_BYTES, startRelay, type RelayOptions } from '../relay/relay.ts';
import { jsonLinesLog, type RelayLog } from '../kernel/log.ts';
import { PrometheusMetrics } from '../observability/prometheus.ts';
import { relaySampler, startMetricsListener } from './metrics.ts';
import { parseCommand, type Values } from './spec.ts';
import { relay as spec } from './service-specs.ts';
import { parseListenAddress } from '../relay/socket-listener.ts';
import { functionUrlRegion, sigV4Signer, type RequestSigner } from '../aws/sigv4-signer.ts';
import { SqsBatchSender } from '../relay/sqs-sender.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import type { VaultTls } from '../vault/vault-tls.ts';
import type { VaultRedirectPolicy } from '../vault/vault-redirect.ts';
import { cliVaultConnection } from './vault-connection.ts';
import { EXIT, type CliIo } from './io.ts';
import { isLoopbackHost, loadRoutes, UNAUTHENTICATED_ACCESS_FLAG, untilStopped, usageError } from './shared.ts';

const SQS_QUEUE_URL = /^https:\/\/sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?\/\d{12}\/[A-Za-z0-9_-]+(?:\.fifo)?$/;

type RelayValues = Values<typeof spec>;
type AuditListenMode = NonNullable<RelayOptions['auditListenMode']>;

export async function relayCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const log = jsonLinesLog(io.stderr, Date.now, 'relay', values.quiet);
  const sources = checkSources(values, io);
  if (typeof sources === 'number') return sources;
  const vault = await connectVault(values, io, log);
  if (typeof vault === 'number') return vault;
  const sender = await relaySender(values, io, log);
  if (typeof sender === 'number') return sender;
  const options = relayOptions(values, io.env, { sender, log, auditListenMode: sources.auditListenMode, vault });
  let relay;
  try {
    relay = await startRelay(options);
  } catch (e) {
    vault.auth?.stop();
    io.stderr(`vault-rollout relay: cannot start: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
  // Prometheus with --metrics-port: the relay's counters and spool, and its Vault requests (event subscriptions).
  const prometheus = new PrometheusMetrics();
  prometheus.addSampler(relaySampler(relay));
  const metricsServer = await startMetricsListener(io, 'relay', prometheus, values);
  if (metricsServer !== undefined && 'error' in metricsServer) {
    await relay.stop(0);
    vault.auth?.stop();
    return usageError(io, 'relay', metricsServer.error);
  }
  const uninstallMetrics = metricsServer === undefined ? () => {} : prometheus.install();

  await untilStopped(signal);
  // Durations: bounded by their specs.
  const graceMs = values.grace;
  log.info('stopping: spooling what is held, delivering for the grace period', { graceMs });
  await relay.stop(graceMs);
  uninstallMetrics();
  await metricsServer?.close();
  return EXIT.ok;
}

/** The checks of the sources (at least one; a listener other hosts reach only when said; KV event types only). */
function checkSources(values: RelayValues, io: CliIo): { auditListenMode: AuditListenMode } | number {
  if (!values['audit-file'] && !values['audit-listen'] && values.events.length === 0)
    return usageError(io, 'relay', 'give at least one source: --audit-file, --audit-listen or --events');
  if (values['audit-listen']) {
    let address;
    try {
      address = parseListenAddress(values['audit-listen']);
    } catch (e) {
      return usageError(io, 'relay', e);
    }
    // Whatever connects is believed and signed: on an address other hosts reach, anyone could inject changes.
    if (address.type === 'tcp' && !isLoopbackHost(address.host) && !values[UNAUTHENTICATED_ACCESS_FLAG]) {
      io.stderr(
        `vault-rollout relay: --audit-listen ${values['audit-listen'].slice(0, 100)} would let anyone who reaches it inject audit entries that the relay signs and delivers: use unix:///PATH or a loopback address (127.0.0.1, ::1), or add --${UNAUTHENTICATED_ACCESS_FLAG}\n`,
      );
      return EXIT.failure;
    }
  }
  const auditListenMode = ({ '0600': 0o600, '600': 0o600, '0660': 0o660, '660': 0o660 } as const)[
    values['audit-listen-mode'] as '0600'
  ];
  if (auditListenMode === undefined)
    return usageError(
      io,
      'relay',
      "--audit-listen-mode: 0600 (the relay's user only) or 0660 (its group too, e.g. Vault's)",
    );
  for (const eventType of values.events)
    if (!/^kv(-v[12])?(\/[\w*-]+|\*)$/.test(eventType))
      return usageError(
        io,
        'relay',
        `--events ${eventType}: use KV event types such as kv-v1/*, kv-v2/*, kv-v2/data-write or kv*`,
      );
  return { auditListenMode };
}

/** Vault for the event subscriptions: its token source and TLS when --events is given. */
interface RelayVault {
  readonly auth?: VaultTokenSource;
  readonly tls?: VaultTls;
  readonly redirects: VaultRedirectPolicy;
}

/** The Vault connection --events needs (none without it), or the exit code. */
async function connectVault(values: RelayValues, io: CliIo, log: RelayLog): Promise<RelayVault | number> {
  // Vault's other nodes, which a standby's redirect may name; otherwise the token goes only to the --vault-addr host.
  const redirects = { allowedHosts: values['vault-redirect-hosts'] };
  if (values.events.length === 0) return { redirects };
  // --vault-addr, else VAULT_ADDR (its spec reads the variable).
  const vaultAddr = values['vault-addr'];
  if (!vaultAddr || !/^https?:\/\//.test(vaultAddr))
    return usageError(io, 'relay', '--events needs --vault-addr (or VAULT_ADDR): http(s)://HOST:PORT');
  if (!URL.canParse(vaultAddr)) return usageError(io, 'relay', `--vault-addr ${vaultAddr} is not a URL`);
  if (vaultAddr.startsWith('http://') && !isLoopbackHost(new URL(vaultAddr).hostname))
    log.warn('--vault-addr is plain http: the Vault token and the events travel unencrypted; use https', {
      vault: new URL(vaultAddr).host,
    });
  try {
    const connection = await cliVaultConnection(io, { vaultAddr, log, redirects });
    return { auth: connection.auth, ...(connection.tls ? { tls: connection.tls } : {}), redirects };
  } catch (e) {
    io.stderr(`vault-rollout relay: --events: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
}

/** Where batches go: the function (HTTP) or, planning here, the SQS queue; or the exit code. */
async function relaySender(values: RelayValues, io: CliIo, log: RelayLog): Promise<BatchSender | number> {
  const to = values.to;
  if (!to) return usageError(io, 'relay', '--to is required: the function URL, or an SQS queue URL');
  let toUrl: URL;
  try {
    toUrl = new URL(to);
  } catch {
    return usageError(io, 'relay', `--to ${to} is not a URL`);
  }
  if (values['to-sqs'] || SQS_QUEUE_URL.test(to)) return sqsSender(values, io, to);
  return httpSender(values, io, log, { to, toUrl });
}

/** Sending to SQS: the relay plans with the routing table and queues rollout messages. */
async function sqsSender(values: RelayValues, io: CliIo, to: string): Promise<BatchSender | number> {
  const env = io.env;
  if (!values.routes)
    return usageError(io, 'relay', 'sending to SQS plans here: give the routing table with --routes FILE');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  const region = SQS_QUEUE_URL.exec(to)?.[1] ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (!region) return usageError(io, 'relay', 'cannot tell the SQS region from the queue URL: set AWS_REGION');
  const endpoint = env.AWS_ENDPOINT_URL_SQS ?? env.AWS_ENDPOINT_URL;
  const client = new SQSClient({ region, ...(endpoint ? { endpoint } : {}) });
  // Key-level restarts: this relay plans, so it keeps the key baselines of what it sees: in the state
  // table or file when one is set (VAULT_ROLLOUT_STATE_TABLE / _DB), else in a SQLite file beside its spool.
  mkdirSync(values.spool, { recursive: true, mode: 0o700 });
  const store = await rotationStoreFromEnv(env, join(values.spool, 'key-baselines.sqlite'));
  const baselines = store !== undefined && isKeyBaselineStore(store) ? store : undefined;
  return new SqsBatchSender({
    table,
    queue: new SqsRolloutQueue({ client, queueUrl: to }),
    queueUrl: to,
    ...(baselines ? { baselines } : {}),
  });
}

/**
 * Sending to the function over HTTP(S): signed with HMAC and/or a bearer token, or SigV4 for an AWS_IAM Function URL.
 */
function httpSender(
  values: RelayValues,
  io: CliIo,
  log: RelayLog,
  { to, toUrl }: { to: string; toUrl: URL },
): BatchSender | number {
  if (toUrl.protocol !== 'https:' && toUrl.protocol !== 'http:')
    return usageError(io, 'relay', '--to must be an http(s) URL');
  const hmacSecret = io.env.VAULT_ROLLOUT_WEBHOOK_SECRET || undefined;
  const bearerToken = io.env.VAULT_ROLLOUT_WEBHOOK_TOKEN || undefined;
  // auto, app (HMAC / bearer) or iam (SigV4, for a Function URL with AWS_IAM): one of its spec's choices.
  const toAuth = values['to-auth'];
  const urlRegion = functionUrlRegion(toUrl.hostname);
  // auto: a Function URL with no app-level secret is an AWS_IAM one (staging's `httpAuth: iam`); anything else is app.
  const iam =
    toAuth === 'iam' ||
    (toAuth === 'auto' && urlRegion !== undefined && hmacSecret === undefined && bearerToken === undefined);
  let signer: RequestSigner | undefined;
  if (iam) {
    const signed = iamSigner(io, log, toUrl, urlRegion, bearerToken);
    if (typeof signed === 'number') return signed;
    signer = signed;
  } else if (hmacSecret === undefined && bearerToken === undefined) {
    io.stderr(
      'vault-rollout relay: set VAULT_ROLLOUT_WEBHOOK_SECRET (HMAC signing; and/or VAULT_ROLLOUT_WEBHOOK_TOKEN, a bearer token): the function refuses unsigned batches (or --to-auth iam for a Function URL with AWS_IAM)\n',
    );
    return EXIT.failure;
  }
  if (toUrl.protocol === 'http:' && !isLoopbackHost(toUrl.hostname))
    log.warn('--to is plain http: audit entries travel unencrypted; use https', { to: toUrl.origin });
  return new HttpBatchSender({
    baseUrl: to,
    ...(hmacSecret !== undefined ? { hmacSecret } : {}),
    ...(bearerToken !== undefined ? { bearerToken } : {}),
    ...(signer ? { signer } : {}),
  });
}

/** --to-auth iam: a SigV4 signer (service lambda) with the relay host's AWS credentials, or the exit code. */
function iamSigner(
  io: CliIo,
  log: RelayLog,
  toUrl: URL,
  urlRegion: string | undefined,
  bearerToken: string | undefined,
): RequestSigner | number {
  if (bearerToken !== undefined)
    return usageError(
      io,
      'relay',
      '--to-auth iam signs the Authorization header with SigV4: unset VAULT_ROLLOUT_WEBHOOK_TOKEN (a bearer token would take the same header)',
    );
  const region = urlRegion ?? io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  if (!region)
    return usageError(
      io,
      'relay',
      '--to-auth iam: cannot tell the region from --to (not a *.lambda-url.<region>.on.aws URL): set AWS_REGION',
    );
  const signer = sigV4Signer({ region, credentials: fromNodeProviderChain() });
  log.info("signing with SigV4 (service lambda) using the relay host's AWS credentials", {
    region,
    to: toUrl.origin,
  });
  return signer;
}

/** The relay's options from the flags: spool, batching, sources and where batches go. */
function relayOptions(
  values: RelayValues,
  env: CliIo['env'],
  o: { sender: BatchSender; log: RelayLog; auditListenMode: AuditListenMode; vault: RelayVault },
): RelayOptions {
  // Sizes and durations: bounded by their specs.
  const spoolMaxMb = values['spool-max-mb'];
  const vaultAddr = values['vault-addr'];
  const { auth, tls, redirects } = o.vault;
  return {
    spoolDir: values.spool,
    spoolMaxBytes: spoolMaxMb !== undefined ? Math.floor(spoolMaxMb * 1024 * 1024) : DEFAULT_SPOOL_MAX_BYTES,
    sender: o.sender,
    log: o.log,
    // How long a record may wait for others to share its batch: latency against fewer, larger requests.
    batch: { maxDelayMs: values['batch-wait'] },
    ...(values['audit-file']
      ? { auditFile: { path: values['audit-file'], startAt: values['from-start'] ? 'start' : 'end' } }
      : {}),
    ...(values['audit-listen'] ? { auditListen: values['audit-listen'], auditListenMode: o.auditListenMode } : {}),
    ...(auth && vaultAddr
      ? {
          events: {
            vaultAddr,
            eventTypes: values.events,
            namespaces: values['vault-namespace'],
            auth,
            redirects,
            ...(tls ? { tls } : {}),
            ...(values.filter ? { filter: values.filter } : {}),
            ...(env.VAULT_NAMESPACE ? { vaultNamespace: env.VAULT_NAMESPACE } : {}),
          },
        }
      : {}),
  };
}
