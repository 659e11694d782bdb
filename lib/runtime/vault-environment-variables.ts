/**
 * The registry's Vault variables (environment-variables.ts lists them in its order): Vault's own names, as the vault
 * CLI reads them — the address and namespace, the auth methods (token, AppRole, AWS, Kubernetes) and TLS.
 */
import { VAULT_CLIENTS, type EnvironmentVariable } from './environment-variable.ts';

export const VAULT_ENVIRONMENT_VARIABLES: readonly EnvironmentVariable[] = [
  {
    name: 'VAULT_ADDR',
    readBy: VAULT_CLIENTS,
    description:
      "The Vault address (`http(s)://HOST:PORT`): `status`, `reconcile`, the relay's event subscription, serve's status page, the reconcile function.",
    secret: false,
  },
  {
    name: 'VAULT_NAMESPACE',
    readBy: VAULT_CLIENTS,
    description: 'The Vault Enterprise namespace requests go to.',
    secret: false,
    default: 'the root namespace',
  },
  {
    name: 'VAULT_AUTH_METHOD',
    readBy: VAULT_CLIENTS,
    description: 'Which Vault login to use when several are configured: `token`, `approle`, `aws` or `kubernetes`.',
    secret: false,
    default: 'the one configured',
  },
  {
    name: 'VAULT_TOKEN',
    readBy: VAULT_CLIENTS,
    description: 'A Vault token (looked up and renewed while renewable).',
    secret: true,
    default: '`~/.vault-token` when no other login is configured',
  },
  { name: 'VAULT_TOKEN_FILE', readBy: VAULT_CLIENTS, description: 'A file holding the Vault token.', secret: false },
  {
    name: 'VAULT_TOKEN_SSM',
    readBy: VAULT_CLIENTS,
    description: 'An SSM SecureString parameter holding the Vault token.',
    secret: false,
  },
  { name: 'VAULT_ROLE_ID', readBy: VAULT_CLIENTS, description: 'AppRole role ID.', secret: true },
  {
    name: 'VAULT_ROLE_ID_SSM',
    readBy: VAULT_CLIENTS,
    description: 'An SSM parameter holding the AppRole role ID.',
    secret: false,
  },
  { name: 'VAULT_SECRET_ID', readBy: VAULT_CLIENTS, description: 'AppRole secret ID.', secret: true },
  {
    name: 'VAULT_SECRET_ID_SSM',
    readBy: VAULT_CLIENTS,
    description: 'An SSM SecureString parameter holding the AppRole secret ID.',
    secret: false,
  },
  {
    name: 'VAULT_SECRET_ID_SECRETS_MANAGER',
    readBy: VAULT_CLIENTS,
    description: 'A Secrets Manager secret holding the AppRole secret ID.',
    secret: false,
  },
  {
    name: 'VAULT_APPROLE_MOUNT',
    readBy: VAULT_CLIENTS,
    description: 'The AppRole auth mount.',
    secret: false,
    default: '`approle`',
  },
  {
    name: 'VAULT_AWS_ROLE',
    readBy: VAULT_CLIENTS,
    description: "The Vault role of the AWS IAM login (the process's AWS credentials sign `sts:GetCallerIdentity`).",
    secret: false,
  },
  {
    name: 'VAULT_AWS_MOUNT',
    readBy: VAULT_CLIENTS,
    description: 'The AWS auth mount.',
    secret: false,
    default: '`aws`',
  },
  {
    name: 'VAULT_AWS_HEADER_VALUE',
    readBy: VAULT_CLIENTS,
    description: "The mount's `iam_server_id_header_value`, signed as `X-Vault-AWS-IAM-Server-ID`.",
    secret: false,
  },
  {
    name: 'VAULT_AWS_STS_ENDPOINT',
    readBy: VAULT_CLIENTS,
    description: 'The STS endpoint the AWS login signs for.',
    secret: false,
    default: '`https://sts.amazonaws.com`',
  },
  {
    name: 'VAULT_AWS_STS_REGION',
    readBy: VAULT_CLIENTS,
    description: 'The STS signing region of the AWS login.',
    secret: false,
    default: '`us-east-1`',
  },
  {
    name: 'VAULT_K8S_ROLE',
    readBy: VAULT_CLIENTS,
    description: "The Vault role of the Kubernetes login (the pod's ServiceAccount token).",
    secret: false,
  },
  {
    name: 'VAULT_K8S_MOUNT',
    readBy: VAULT_CLIENTS,
    description: 'The Kubernetes auth mount.',
    secret: false,
    default: '`kubernetes`',
  },
  {
    name: 'VAULT_K8S_TOKEN_FILE',
    readBy: VAULT_CLIENTS,
    description:
      "The ServiceAccount token file of the Kubernetes login, read afresh at each login: a token projected for Vault's audience (`VAULT_K8S_AUDIENCE`), never the API-audience token of the pod.",
    secret: false,
    default: '`/var/run/secrets/vault-rollout/vault/token` (the Helm chart projects it)',
  },
  {
    name: 'VAULT_K8S_AUDIENCE',
    readBy: VAULT_CLIENTS,
    description:
      "The audience the Kubernetes login's token must carry (and the Vault role's `audience`): a token for any other audience is refused before it is sent.",
    secret: false,
    default: '`vault`',
  },
  {
    name: 'VAULT_CACERT',
    readBy: VAULT_CLIENTS,
    description: "A PEM file of the CA certificates Vault's certificate is verified against.",
    secret: false,
    default: "Node's Mozilla roots",
  },
  {
    name: 'VAULT_CAPATH',
    readBy: VAULT_CLIENTS,
    description: 'A directory of `.pem`/`.crt` CA files (when `VAULT_CACERT` is unset).',
    secret: false,
  },
  {
    name: 'VAULT_CLIENT_CERT',
    readBy: VAULT_CLIENTS,
    description: 'A client certificate for TLS to Vault (with `VAULT_CLIENT_KEY`).',
    secret: false,
  },
  {
    name: 'VAULT_CLIENT_KEY',
    readBy: VAULT_CLIENTS,
    description: "The client certificate's private key file.",
    secret: false,
  },
  {
    name: 'VAULT_SKIP_VERIFY',
    readBy: VAULT_CLIENTS,
    description: "`true`: do not verify Vault's certificate (logs a warning; use `VAULT_CACERT` instead).",
    secret: false,
  },
];
