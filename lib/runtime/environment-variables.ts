/**
 * Every environment variable vault-rollout's code reads (lib/ and functions/), with who reads it, what it means,
 * whether it holds a secret, and its default. docs/reference/environment.md is generated from this table
 * (`npm run docs:reference`); test/unit/runtime/environment-variables.test.ts scans the sources and fails on a
 * variable read there and missing here, or listed here and read nowhere.
 *
 * Not listed: the variables a routing table names (a kubeconfig's `{ env: VAR }`, a notification sink's
 * `urlFromEnv`/`secretFromEnv`): their names are the table's, not the code's.
 */

import { LOCAL, type EnvironmentVariable } from './environment-variable.ts';
import { VAULT_ENVIRONMENT_VARIABLES } from './vault-environment-variables.ts';

export const ENVIRONMENT_VARIABLES: readonly EnvironmentVariable[] = [
  // vault-rollout's own
  {
    name: 'VAULT_ROLLOUT_ROUTES',
    readBy: ['lambda', 'serve', 'worker', 'relay', 'cli'],
    description:
      'The routing table file the deployment bundles (relative to the package root; serverless.yml sets it); in every command that takes `--routes`, the table used when `--routes` is absent.',
    secret: false,
    default:
      'none (give `--routes`); serve: `infra/routes/example.yaml`, the demo, refused without `--allow-example-routes`',
  },
  {
    name: 'VAULT_ROLLOUT_AUTH',
    readBy: ['lambda'],
    description:
      "Which webhook authentication the HTTP function takes: `hmac`, `bearer` or `hmac,bearer` (serverless.yml's `httpAuth`). Fails closed.",
    secret: false,
    default: 'hmac',
  },
  {
    name: 'VAULT_ROLLOUT_WEBHOOK_SECRET',
    readBy: ['serve', 'relay'],
    description:
      'The HMAC-SHA256 key requests to `serve` are signed with (and the relay signs with); at least 32 characters.',
    secret: true,
  },
  {
    name: 'VAULT_ROLLOUT_WEBHOOK_TOKEN',
    readBy: ['serve', 'relay'],
    description: 'The bearer token `serve` accepts (and the relay sends); at least 32 characters.',
    secret: true,
  },
  {
    name: 'VAULT_ROLLOUT_STATUS_TOKEN',
    readBy: ['serve'],
    description:
      "The read-only credential of serve's status page (`--status-page`): `Authorization: Bearer`, or the password of HTTP Basic over TLS or from loopback. At least 32 characters, and none of the intake's secrets.",
    secret: true,
  },
  {
    name: 'VAULT_ROLLOUT_WEBHOOK_SECRET_SSM',
    readBy: ['lambda'],
    description: 'The SSM SecureString parameter holding the HMAC secret of the HTTP function.',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM',
    readBy: ['lambda'],
    description: 'The SSM SecureString parameter holding the bearer token of the HTTP function.',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_QUEUE_URL',
    readBy: ['lambda', 'cli'],
    description:
      'The SQS FIFO rollout queue URL (the HTTP and reconcile functions send to it; `reconcile --queue-url` defaults to it).',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_DLQ_URL',
    readBy: ['worker', 'lambda'],
    description:
      'The dead-letter queue refused messages are sent to, with their reason (`worker --dlq-url` defaults to it).',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_QUEUE_FILE',
    readBy: ['serve'],
    description: "serve's SQLite queue file.",
    secret: false,
    default: '`$XDG_STATE_HOME/vault-rollout/serve-queue.sqlite`',
  },
  {
    name: 'VAULT_ROLLOUT_STATE_TABLE',
    readBy: ['worker', 'cli', 'lambda'],
    description:
      "The DynamoDB rotation-state table (halts, released waves, key baselines, the notification outbox). Set in Lambda; point the CLI at a Lambda deployment's store with it.",
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_STATE_DB',
    readBy: LOCAL,
    description: 'The SQLite rotation-state file, when no `VAULT_ROLLOUT_STATE_TABLE` is set.',
    secret: false,
    default: '`$XDG_STATE_HOME/vault-rollout/rotations.sqlite`',
  },
  {
    name: 'VAULT_ROLLOUT_SLOTS_TABLE',
    readBy: ['serve', 'worker', 'cli', 'lambda'],
    description:
      'The DynamoDB table of rollout slots (`rollout.maxUnavailable`); required in Lambda when the table bounds rollouts.',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_SLOTS_DB',
    readBy: LOCAL,
    description: 'The SQLite file of rollout slots, when no `VAULT_ROLLOUT_SLOTS_TABLE` is set.',
    secret: false,
    default: 'the rotation-state file',
  },
  {
    name: 'VAULT_ROLLOUT_VISIBILITY_SECONDS',
    readBy: ['serve', 'worker'],
    description: 'The visibility timeout of received messages, extended by a heartbeat while a step runs.',
    secret: false,
    default: '30',
  },
  {
    name: 'VAULT_ROLLOUT_FOLLOW',
    readBy: ['serve', 'worker', 'lambda'],
    description: '`off`: only patch, never follow rollouts (results carry no rollout state, gates see no health).',
    secret: false,
    default: 'on',
  },
  {
    name: 'VAULT_ROLLOUT_FOLLOW_SECONDS',
    readBy: ['serve', 'worker', 'lambda'],
    description:
      "Earlier releases' in-line follow budget, still read: `0` means `VAULT_ROLLOUT_FOLLOW=off`, any other number (to 900) on. Prefer `VAULT_ROLLOUT_FOLLOW`.",
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_WATCH',
    readBy: ['serve', 'worker'],
    description:
      "`off`: keep no watches open to wake held continuations; a rollout's end is then seen at the next look (at most 15 s later).",
    secret: false,
    default: 'on',
  },
  {
    name: 'VAULT_ROLLOUT_READY_STUCK_SECONDS',
    readBy: ['serve'],
    description:
      "How long serve's worker loops may go without an iteration before `GET /readyz` answers 503 (1 to 86400).",
    secret: false,
    default: '300',
  },
  {
    name: 'VAULT_ROLLOUT_NOTIFY_SSM_PREFIX',
    readBy: ['lambda'],
    description:
      'The SSM path prefix of notification sink secrets: each variable a sink names is read from `<prefix>/<VARIABLE>`.',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP',
    readBy: ['serve', 'worker', 'cli', 'lambda'],
    description: '`1`: allow plain-http notification sinks on a loopback host (tests).',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_NOTIFY_ALLOW_LINK_LOCAL',
    readBy: ['serve', 'worker', 'cli', 'lambda'],
    description:
      '`1`: allow notification sinks on link-local or cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal …), as written or as resolved; refused otherwise.',
    secret: false,
  },
  {
    name: 'VAULT_ROLLOUT_ALLOW_EXEC',
    readBy: LOCAL,
    description:
      'The clusters (names, separated by commas) whose kubeconfig user may run its exec credential plugin (file, env or inline kubeconfigs; never SSM, Secrets Manager or Lambda). The plugin gets PATH, HOME and its `exec.env` only. The routing table cannot grant this.',
    secret: false,
    default: 'none: exec plugins are refused',
  },
  {
    name: 'VAULT_ROLLOUT_ALLOW_TOKEN_FILE',
    readBy: ['serve', 'worker', 'cli', 'lambda'],
    description:
      "The clusters (names, separated by commas) whose kubeconfig user may send the file its `tokenFile` names (file, env or inline kubeconfigs; never SSM or Secrets Manager). The pod's own ServiceAccount token goes only to the in-cluster API server, whatever this says. The routing table cannot grant this.",
    secret: false,
    default: 'none: token files are refused',
  },
  {
    name: 'VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR',
    readBy: ['serve', 'worker', 'cli'],
    description:
      'Where `inCluster: true` reads the ServiceAccount token and CA (tests, or a token projected elsewhere).',
    secret: false,
    default: '`/var/run/secrets/kubernetes.io/serviceaccount`',
  },
  // Vault's own names, as the vault CLI reads them
  ...VAULT_ENVIRONMENT_VARIABLES,
  // AWS's own names
  {
    name: 'AWS_REGION',
    readBy: ['serve', 'worker', 'relay', 'cli', 'lambda'],
    description: 'The AWS region of SQS, DynamoDB, SSM, Secrets Manager, SNS and EKS clients (Lambda sets it).',
    secret: false,
  },
  {
    name: 'AWS_DEFAULT_REGION',
    readBy: ['serve', 'worker', 'relay', 'cli'],
    description: 'The region when `AWS_REGION` is unset.',
    secret: false,
    default: '`us-east-1` for `worker`',
  },
  {
    name: 'AWS_ENDPOINT_URL_SQS',
    readBy: ['relay'],
    description: "The SQS endpoint of the relay's SQS sender (ElasticMQ, LocalStack).",
    secret: false,
  },
  {
    name: 'AWS_ENDPOINT_URL',
    readBy: ['relay'],
    description: "The endpoint of the relay's SQS sender when `AWS_ENDPOINT_URL_SQS` is unset.",
    secret: false,
  },
  {
    name: 'POWERTOOLS_SERVICE_NAME',
    readBy: ['lambda'],
    description: 'The `service` of log lines and EMF metrics.',
    secret: false,
    default: '`vault-rollout`',
  },
  {
    name: 'POWERTOOLS_METRICS_NAMESPACE',
    readBy: ['serve', 'worker', 'lambda'],
    description: 'The CloudWatch namespace of EMF metrics (serverless.yml: `VaultRollout/<stage>`).',
    secret: false,
    default: '`VaultRollout`',
  },
  {
    name: 'LAMBDA_TASK_ROOT',
    readBy: ['lambda'],
    description: 'The package root `VAULT_ROLLOUT_ROUTES` is relative to (Lambda sets it).',
    secret: false,
    default: 'the working directory',
  },
  // The platform's
  {
    name: 'KUBERNETES_SERVICE_HOST',
    readBy: ['serve', 'worker', 'cli'],
    description: 'The API server of `inCluster: true` (the kubelet sets it in every pod).',
    secret: false,
  },
  { name: 'KUBERNETES_SERVICE_PORT', readBy: ['serve', 'worker', 'cli'], description: 'Its port.', secret: false },
  {
    name: 'KUBERNETES_EXEC_INFO',
    readBy: ['serve', 'worker', 'cli'],
    description: "Set (not read) by vault-rollout for a kubeconfig's exec credential plugin, as kubectl does.",
    secret: false,
  },
  {
    name: 'XDG_STATE_HOME',
    readBy: LOCAL,
    description: 'Where the default queue and state files live (`$XDG_STATE_HOME/vault-rollout/`).',
    secret: false,
    default: '`~/.local/state`',
  },
  {
    name: 'HOME',
    readBy: ['serve', 'relay', 'cli'],
    description: 'Where `~/.vault-token` is looked for.',
    secret: false,
  },
  {
    name: 'NO_COLOR',
    readBy: ['cli'],
    description:
      'Any non-empty value: no colour in the tables the CLI prints (FAILED, HALTED, POISONED, BEHIND), even on a terminal.',
    secret: false,
  },
  { name: 'TERM', readBy: ['cli'], description: '`dumb`: no colour in the tables the CLI prints.', secret: false },
  {
    name: 'PATH',
    readBy: ['serve', 'worker', 'cli'],
    description: "Where a kubeconfig's exec credential plugin is looked up.",
    secret: false,
  },
  {
    name: 'USER',
    readBy: ['cli'],
    description: "`halts clear`: who cleared a halt, when the operating system cannot say (kept in the store's trail).",
    secret: false,
  },
  {
    name: 'LOGNAME',
    readBy: ['cli'],
    description: '`halts clear`: who cleared a halt, when neither the operating system nor USER can say.',
    secret: false,
  },
];
