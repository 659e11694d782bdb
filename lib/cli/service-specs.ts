/**
 * The specs of the long-running commands: serve (the HTTP intake with its local queue), worker (the SQS consumer)
 * and relay (Vault's change feed shipped on). Data only; specs.ts lists them with the others.
 */
import type { CommandSpec } from './spec.ts';
import {
  MAX_LOOPS,
  PORT,
  routes,
  dryRun,
  vaultAddr,
  vaultRedirectHosts,
  metricsPort,
  metricsHost,
  unauthenticated,
} from './option-specs.ts';

export const serve = {
  name: 'serve',
  summary: 'The HTTP intake with a durable local queue and worker, on this machine',
  description:
    "The HTTP intake of the Lambda function on this machine: 202 once the change is on disk (a SQLite queue). Authentication from VAULT_ROLLOUT_WEBHOOK_SECRET (HMAC) and/or VAULT_ROLLOUT_WEBHOOK_TOKEN (bearer); without either it refuses to start unless told --insecure-no-auth, and on a --host other than loopback it refuses that too unless also told --i-understand-unauthenticated-access. It refuses the example routing table (infra/routes/example.yaml) unless told --allow-example-routes. Each secret is at least 32 characters. A peer refused 20 times within a minute is answered 429 with Retry-After until the minute ends. GET /metrics: Prometheus, no authentication. --status-page: GET /status, the fleet status page, behind its own read-only credential VAULT_ROLLOUT_STATUS_TOKEN (Bearer, or the password of HTTP Basic over TLS or from loopback only), never the intake's.",
  options: [
    { ...routes, env: 'VAULT_ROLLOUT_ROUTES', default: 'infra/routes/example.yaml' },
    {
      name: 'allow-example-routes',
      type: 'boolean',
      default: false,
      summary: 'serve infra/routes/example.yaml (the demo), which otherwise is refused',
    },
    { name: 'port', ...PORT, arg: 'PORT', default: 8787, summary: 'the port to listen on (0: any free port)' },
    { name: 'host', type: 'string', arg: 'HOST', default: '127.0.0.1', summary: 'the address to listen on' },
    { name: 'insecure-no-auth', type: 'boolean', default: false, summary: 'accept unauthenticated requests' },
    dryRun,
    {
      name: 'request-timeout',
      type: 'duration',
      default: '30s',
      min: 1000,
      max: 3_600_000,
      summary: 'the longest a request may take to arrive',
    },
    {
      name: 'queue-file',
      type: 'string',
      arg: 'PATH',
      env: 'VAULT_ROLLOUT_QUEUE_FILE',
      summary: 'the queue (default: $XDG_STATE_HOME or ~/.local/state, /vault-rollout/serve-queue.sqlite)',
    },
    { name: 'max-connections', type: 'integer', default: 256, min: 1, max: 65_535, summary: 'concurrent connections' },
    { name: 'loops', type: 'integer', default: 4, min: 1, max: MAX_LOOPS, summary: 'workers side by side' },
    { name: 'status-page', type: 'boolean', default: false, summary: 'serve GET /status, the fleet status page' },
    {
      name: 'status-refresh',
      type: 'duration',
      default: '30s',
      min: 5000,
      max: 3_600_000,
      summary: 'how often the status page refreshes itself (whole seconds)',
    },
    {
      name: 'status-behind-tls-proxy',
      type: 'boolean',
      default: false,
      summary:
        'the listener is reached only through a TLS-terminating proxy: take HTTP Basic on the status page when it says X-Forwarded-Proto: https',
    },
    unauthenticated,
  ],
  exits: [
    [0, 'stopped by SIGTERM or SIGINT after finishing queued work'],
    [1, 'cannot start (authentication, routing table, queue, address)'],
  ],
  renamed: [],
} as const satisfies CommandSpec;

export const worker = {
  name: 'worker',
  summary: 'The SQS queue consumer outside Lambda',
  description:
    'Receives rollout messages, restarts, deletes what succeeded; failures come back after the visibility timeout and end in the dead-letter queue. AWS_ENDPOINT_URL_SQS overrides the endpoint. Runs until SIGTERM/SIGINT.',
  options: [
    routes,
    { name: 'queue-url', type: 'string', arg: 'URL', summary: 'the SQS queue' },
    {
      name: 'dlq-url',
      type: 'string',
      arg: 'URL',
      env: 'VAULT_ROLLOUT_DLQ_URL',
      summary: 'send refused messages there at once, with their reason',
    },
    { name: 'concurrency', type: 'integer', default: 4, min: 1, max: 64, summary: 'pollers side by side' },
    {
      name: 'batch-size',
      type: 'string',
      arg: 'auto|1-10',
      default: 'auto',
      summary: 'messages per receive (auto: 10 when a route sets rollout.settle, else 1)',
    },
    dryRun,
    metricsPort,
    metricsHost,
  ],
  exits: [
    [0, 'stopped by SIGTERM or SIGINT'],
    [1, 'the routing table cannot be read'],
  ],
} as const satisfies CommandSpec;

export const relay = {
  name: 'relay',
  summary: "Ship Vault's change feed to the function or the queue",
  description:
    "Ships Vault's change feed (file or socket audit device, event notifications) to the function, signed with VAULT_ROLLOUT_WEBHOOK_SECRET (and/or bearer VAULT_ROLLOUT_WEBHOOK_TOKEN), or plans here with --routes and queues on SQS. Every batch is spooled on disk first and delivered in order; runs until SIGTERM/SIGINT. Vault token: VAULT_TOKEN, or VAULT_ROLE_ID + VAULT_SECRET_ID (AppRole).",
  options: [
    { name: 'audit-file', type: 'string', arg: 'PATH', summary: "a file audit device's log to follow" },
    {
      name: 'from-start',
      type: 'boolean',
      default: false,
      summary: 'read --audit-file from its start (else from its end)',
    },
    {
      name: 'audit-listen',
      type: 'string',
      arg: 'unix:///PATH|tcp://HOST:PORT',
      summary: 'listen for a socket audit device',
    },
    {
      name: 'audit-listen-mode',
      type: 'enum',
      choices: ['0600', '600', '0660', '660'],
      default: '0600',
      summary: "the unix socket's mode: the relay's user only, or its group too",
    },
    vaultAddr,
    {
      name: 'events',
      type: 'list',
      arg: 'kv-v2/*,…',
      summary: 'subscribe to these event types (Vault Enterprise, OpenBao)',
    },
    { name: 'vault-namespace', type: 'list', arg: 'NS', summary: 'the Vault namespaces to subscribe in' },
    { name: 'filter', type: 'string', arg: 'EXPR', summary: "the subscription's filter expression" },
    vaultRedirectHosts,
    { name: 'to', type: 'string', arg: 'URL', summary: 'the function URL or an SQS queue URL' },
    { name: 'to-sqs', type: 'boolean', default: false, summary: '--to is an SQS queue (plans here: needs --routes)' },
    {
      name: 'to-auth',
      type: 'enum',
      choices: ['auto', 'app', 'iam'],
      default: 'auto',
      summary: 'app: HMAC / bearer; iam: SigV4 for a Function URL with AWS_IAM',
    },
    routes,
    {
      name: 'spool',
      type: 'string',
      arg: 'DIR',
      default: './.vault-rollout-spool',
      summary: 'where batches wait for delivery',
    },
    { name: 'spool-max-mb', type: 'integer', min: 1, max: 1_000_000, summary: 'the most the spool may hold' },
    {
      name: 'grace',
      type: 'duration',
      default: '10s',
      min: 0,
      max: 600_000,
      summary: 'how long to deliver after SIGTERM',
    },
    {
      name: 'batch-wait',
      type: 'duration',
      default: '1s',
      min: 0,
      max: 60_000,
      summary: 'how long a record may wait for others to share its batch',
    },
    unauthenticated,
    metricsPort,
    metricsHost,
  ],
  exits: [
    [0, 'stopped by SIGTERM or SIGINT'],
    [1, 'cannot start (Vault authentication, signing secret, a source)'],
  ],
  renamed: [
    { flag: '--grace-seconds', use: '--grace DURATION, e.g. --grace 10s' },
    { flag: '--batch-wait-ms', use: '--batch-wait DURATION, e.g. --batch-wait 1s or 500ms' },
    { flag: '--namespaces', use: '--vault-namespace NS (repeatable or a,b; --namespace is a Kubernetes namespace)' },
  ],
} as const satisfies CommandSpec;
