// osls variable resolver: what serverless.yml derives from the stage's routing table — the IAM statements of each
// function's role (lib/deploy/iam-from-routes.ts) and the files packaged beside the bundles. Used as
// ${file(./infra/serverless/iam.js):worker} (also http, logs, reconcile, notify, assumedRoles, packagePatterns, clusterPackagePatterns,
// compiledRoutes, intakeRoutes, workerBatchSize). osls require()s this ES module and calls the export with its variable resolver; Node 24 loads
// the TypeScript modules with type stripping. Nothing here touches the network or AWS.
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { refuseSamples, sampleValueProblems } from './samples.js';

const SERVICE_DIR = resolve(import.meta.dirname, '..', '..');
const cache = new Map();

const once = (key, load) => {
  let value = cache.get(key);
  if (value === undefined) cache.set(key, (value = load()));
  return value;
};

/** The webhook parameters the HTTP function reads for an auth mode: HMAC needs the secret, bearer the token. */
export function webhookParameters(auth, secretParameter, tokenParameter) {
  const schemes = String(auth)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = schemes.filter((s) => !['hmac', 'bearer', 'iam'].includes(s));
  if (schemes.length === 0 || unknown.length > 0)
    throw new Error(`param httpAuth "${auth}": give hmac, bearer, both ("hmac,bearer") or iam`);
  return [
    ...(schemes.includes('hmac') ? [secretParameter] : []),
    ...(schemes.includes('bearer') ? [tokenParameter] : []),
  ];
}

/** The stage's routing table, loaded and checked once (a bad table fails packaging with its file:line problems). */
async function routingTable({ resolveVariable }) {
  const routes = await resolveVariable('param:routes');
  return once(`table:${routes}`, async () => {
    const { loadRoutingTable } = await import('../../lib/routing/routing-table.ts');
    return { routes, table: loadRoutingTable(await readFile(resolve(SERVICE_DIR, routes), 'utf8'), routes) };
  });
}

/**
 * What the reconcile function reads to log in to Vault, by method (param vaultAuth): a token or an AppRole role and
 * secret ID from SSM, the secret ID from Secrets Manager when vaultSecretIdSecret is set; nothing for AWS IAM.
 */
export function vaultCredentials(method, { tokenParameter, roleIdParameter, secretIdParameter, secretIdSecret }) {
  if (method === 'aws') return { ssmParameters: [], secrets: [] };
  if (method === 'token') return { ssmParameters: [tokenParameter], secrets: [] };
  if (method === 'approle')
    return secretIdSecret
      ? { ssmParameters: [roleIdParameter], secrets: [secretIdSecret] }
      : { ssmParameters: [roleIdParameter, secretIdParameter], secrets: [] };
  throw new Error(`param vaultAuth "${method}": give aws, approle or token`);
}

async function vaultParams(resolveVariable) {
  const [method, tokenParameter, roleIdParameter, secretIdParameter, secretIdSecret] = await Promise.all(
    ['vaultAuth', 'vaultTokenParameter', 'vaultRoleIdParameter', 'vaultSecretIdParameter', 'vaultSecretIdSecret'].map(
      (p) => resolveVariable(`param:${p}`),
    ),
  );
  return {
    method: String(method),
    tokenParameter,
    roleIdParameter,
    secretIdParameter,
    secretIdSecret: secretIdSecret ? String(secretIdSecret) : '',
  };
}

/** Where the compiled table of `routes` goes: beside it, so kubeconfig files it names stay relative to the same directory. */
export const compiledRoutesFile = (routes) => `${routes.replace(/\.ya?ml$/, '')}.compiled.json`;
/** Where the intake's table goes (compiled without `file` and `inline` kubeconfigs): beside the other. */
export const intakeRoutesFile = (routes) => `${routes.replace(/\.ya?ml$/, '')}.intake.compiled.json`;

/**
 * The file VAULT_ROLLOUT_ROUTES names: the stage's table checked (file:line problems fail packaging) and compiled to
 * JSON (lib/routing/compiled-table.ts), written beside the YAML. The functions never parse YAML at a cold start.
 */
export async function compiledRoutes({ resolveVariable }) {
  const routes = await resolveVariable('param:routes');
  return once(`compiled:${routes}`, async () => {
    const { compileRoutingTable } = await import('../../lib/routing/compiled-table.ts');
    const compiled = compiledRoutesFile(routes);
    await writeFile(
      resolve(SERVICE_DIR, compiled),
      compileRoutingTable(await readFile(resolve(SERVICE_DIR, routes), 'utf8'), routes),
    );
    return compiled;
  });
}

/**
 * The file VAULT_ROLLOUT_ROUTES names for every function but the two that reach clusters (worker, reconcile): the
 * same table compiled without `file` and `inline` kubeconfigs, so the intake functions (http, internet-facing, and
 * logs) carry no cluster credential.
 */
export async function intakeRoutes({ resolveVariable }) {
  const routes = await resolveVariable('param:routes');
  return once(`intake:${routes}`, async () => {
    const { compileRoutingTable } = await import('../../lib/routing/compiled-table.ts');
    const compiled = intakeRoutesFile(routes);
    await writeFile(
      resolve(SERVICE_DIR, compiled),
      compileRoutingTable(await readFile(resolve(SERVICE_DIR, routes), 'utf8'), routes, { withoutKubeconfigs: true }),
    );
    return compiled;
  });
}

async function policies(context) {
  const { resolveVariable } = context;
  const [{ routes, table }, service, stage, auth, secretParameter, tokenParameter, vault, notifyPrefix] =
    await Promise.all([
      routingTable(context),
      resolveVariable('self:service'),
      resolveVariable('sls:stage'),
      resolveVariable('param:httpAuth'),
      resolveVariable('param:webhookSecretParameter'),
      resolveVariable('param:webhookTokenParameter'),
      vaultParams(resolveVariable),
      resolveVariable('param:notifySecretParameterPrefix'),
    ]);
  return once(
    JSON.stringify(['policies', routes, service, stage, auth, secretParameter, tokenParameter, vault, notifyPrefix]),
    async () => {
      const { iamFromRoutes, FUNCTION_NAMES } = await import('../../lib/deploy/iam-from-routes.ts');
      return iamFromRoutes(table, {
        queueArn: { 'Fn::GetAtt': ['RolloutQueue', 'Arn'] },
        logsFailureQueueArn: { 'Fn::GetAtt': ['LogsFailureQueue', 'Arn'] },
        logGroups: Object.fromEntries(FUNCTION_NAMES.map((fn) => [fn, `/aws/lambda/${service}-${stage}-${fn}`])),
        webhookParameters: webhookParameters(auth, secretParameter, tokenParameter),
        vaultCredentials: vaultCredentials(vault.method, vault),
        notifySecretPrefix: String(notifyPrefix),
      });
    },
  );
}

export const http = async (context) => (await policies(context)).http;
export const worker = async (context) => (await policies(context)).worker;
export const logs = async (context) => (await policies(context)).logs;
export const reconcile = async (context) => (await policies(context)).reconcile;
export const notify = async (context) => (await policies(context)).notify;

/** The reconcile function's Vault login settings, as its environment (lib/vault/auth.ts reads them). */
export async function reconcileEnvironment({ resolveVariable }) {
  const vault = await vaultParams(resolveVariable);
  const [addr, namespace, awsRole, headerValue] = await Promise.all(
    ['vaultAddr', 'vaultNamespace', 'vaultAwsRole', 'vaultAwsHeaderValue'].map((p) => resolveVariable(`param:${p}`)),
  );
  vaultCredentials(vault.method, vault);
  // The sample values are refused here, once for the whole stack: every packaging resolves this, and one message
  // listing each param beats the same refusal repeated for every alarm and role that uses the value.
  await refuseSamples(
    resolveVariable,
    await sampleValueProblems(resolveVariable, {
      vaultAddr: addr,
      vaultAuth: vault.method,
      vaultAwsHeaderValue: headerValue,
    }),
  );
  // Reconcile reads the clusters (and records on them): the full table, with its kubeconfigs.
  // Halts (lib/rotations): a halted rotation's changes are never queued by reconcile.
  const env = {
    VAULT_ROLLOUT_ROUTES: await compiledRoutes({ resolveVariable }),
    VAULT_ADDR: addr,
    VAULT_AUTH_METHOD: vault.method,
    VAULT_ROLLOUT_STATE_TABLE: { Ref: 'RotationStateTable' },
  };
  if (namespace) env.VAULT_NAMESPACE = namespace;
  if (vault.method === 'aws')
    Object.assign(env, { VAULT_AWS_ROLE: awsRole }, headerValue ? { VAULT_AWS_HEADER_VALUE: headerValue } : {});
  if (vault.method === 'token') env.VAULT_TOKEN_SSM = vault.tokenParameter;
  if (vault.method === 'approle')
    Object.assign(
      env,
      { VAULT_ROLE_ID_SSM: vault.roleIdParameter },
      vault.secretIdSecret
        ? { VAULT_SECRET_ID_SECRETS_MANAGER: vault.secretIdSecret }
        : { VAULT_SECRET_ID_SSM: vault.secretIdParameter },
    );
  return env;
}

/**
 * The worker's SQS batch size (param workerBatchSize): `auto` derives it from the stage's table — 10 when a route sets
 * rollout.settle (settle coalesces only what one batch holds), else 1 (one cluster per invocation). A number is taken
 * as given; 1 with settling routes fails packaging. Rule and AWS references: lib/deploy/worker-batch-size.ts.
 */
export async function workerBatchSize(context) {
  const [{ table }, param] = await Promise.all([
    routingTable(context),
    context.resolveVariable('param:workerBatchSize'),
  ]);
  const { workerBatchSize: derive } = await import('../../lib/deploy/worker-batch-size.ts');
  return derive(table, param);
}

/** One line per role the worker assumes, with what that role must allow itself: for the stack's Outputs. */
export const assumedRoles = async (context) =>
  (await policies(context)).assumedRoles
    .map((r) => `${r.roleArn} needs eks:DescribeCluster on ${r.statement.Resource.join(', ')}`)
    .join('; ') || 'none';

/** package.patterns, for every function: the intake's table only (no kubeconfig file, no inline kubeconfig). */
export async function packagePatterns(context) {
  return [await intakeRoutes(context)];
}

/**
 * The worker's and reconcile's package.patterns (on top of packagePatterns): the full compiled table and the
 * kubeconfig files it names, relative to the table, so that they sit at the same relative paths under the
 * function's task root as in the repository. Only these two functions reach clusters.
 */
export async function clusterPackagePatterns(context) {
  const { routes, table } = await routingTable(context);
  const files = [await compiledRoutes(context)];
  for (const [name, cluster] of table.clusters) {
    const file = cluster.kubeconfig?.file;
    if (file === undefined) continue;
    const inService = relative(SERVICE_DIR, resolve(SERVICE_DIR, dirname(routes), file));
    if (isAbsolute(file) || inService.startsWith(`..${sep}`) || inService === '..') {
      throw new Error(
        `cluster ${name}: kubeconfig file ${file} is outside the service directory and cannot be packaged; use ssm, secretsManager or eks`,
      );
    }
    files.push(inService.split(sep).join('/'));
  }
  return [...new Set(files)];
}
