/**
 * Lambda: reconcile on an EventBridge schedule. Reads Vault's KV v2 metadata (never data/) with the function's own
 * Vault login (lib/vault/auth.ts: an AWS IAM login with this function's role, AppRole or a token from SSM / Secrets
 * Manager), compares it with what the clusters record, and sends what is behind to the same rollout queue the
 * intake feeds; the worker restarts it. A failed reconcile throws: the Errors alarm sees it and the next schedule
 * tries again (reconcile is level-triggered: nothing is lost between runs).
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { readFile } from 'node:fs/promises';
import { reconcile } from '../lib/pipeline/reconcile.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';
import { lambdaWorkerDeps } from '../lib/runtime/lambda-worker.ts';
import { required } from '../lib/runtime/config.ts';
import { vaultTokenSourceFromEnv } from '../lib/vault/auth.ts';
import { VaultMetadataClient } from '../lib/vault/metadata-client.ts';

const runtime = lambdaRuntime(process.env);
const { executor, rotations } = lambdaWorkerDeps(runtime);
const access = executor.access;
const region = process.env.AWS_REGION;
// The login is kept across invocations of a warm container and renewed by its token source.
let auth: ReturnType<typeof vaultTokenSourceFromEnv> | undefined;

type Runtime = typeof runtime;
type ReconcileReport = Awaited<ReturnType<typeof reconcile>>;

/** The function's Vault login, made once per warm container; a failed login is tried afresh next time. */
async function vaultLogin(env: Runtime['env'], vaultAddr: string, telemetry: Runtime['telemetry']) {
  const log = {
    info: telemetry.info.bind(telemetry),
    warn: telemetry.warn.bind(telemetry),
    error: telemetry.error.bind(telemetry),
  };
  auth ??= vaultTokenSourceFromEnv(env, {
    vaultAddr,
    log,
    readFile: (f) => readFile(f, 'utf8'),
    ssm: () => new SSMClient({ region }),
    secretsManager: () => new SecretsManagerClient({ region }),
    awsCredentials: () => fromNodeProviderChain(),
  });
  try {
    return (await auth).source;
  } catch (e) {
    auth = undefined;
    throw e;
  }
}

/** One log line per route not fully reconciled, unreadable path, failed workload and halted rotation. */
function logProblems(telemetry: Runtime['telemetry'], report: ReconcileReport): void {
  for (const r of report.routes)
    if (r.status !== 'kv2' || r.truncated)
      telemetry.warn('route not fully reconciled', {
        route: r.route,
        status: r.status,
        ...(r.truncated ? { truncated: r.truncated } : {}),
        ...(r.reason ? { reason: r.reason } : {}),
      });
  for (const e of report.pathErrors) telemetry.error('cannot read Vault metadata', { path: e.path, error: e.error });
  for (const w of report.workloads.filter((x) => x.state === 'failed'))
    telemetry.error('cannot reconcile a workload', {
      cluster: w.cluster,
      namespace: w.namespace,
      kind: w.kind,
      name: w.name,
      detail: w.detail,
    });
  for (const h of report.halted)
    telemetry.warn('halted rotation not queued', {
      rotation: h.rotation,
      secrets: h.secrets,
      wave: h.wave,
      waves: h.waves,
      why: h.why,
    });
}

export async function handler(): Promise<{
  paths: number;
  behind: number;
  recorded: number;
  queued: number;
  vaultRequests: number;
}> {
  const { env, telemetry, table } = runtime;
  const vaultAddr = required(env, 'VAULT_ADDR', 'the Vault address (https://HOST:8200)');
  const source = await vaultLogin(env, vaultAddr, telemetry);
  const vault = new VaultMetadataClient({
    vaultAddr,
    auth: source,
    ...(env.VAULT_NAMESPACE ? { namespace: env.VAULT_NAMESPACE } : {}),
  });
  const report = await reconcile({ table, vault, access, rotations, queue: runtime.intakeDeps().queue, now: Date.now });
  const count = (state: string) => report.workloads.filter((w) => w.state === state).length;
  const summary = {
    paths: report.paths.length,
    behind: count('behind'),
    recorded: count('recorded'),
    queued: report.queued.changes,
    vaultRequests: vault.requests,
  };
  logProblems(telemetry, report);
  telemetry.info('reconcile done', { ...summary, failed: count('failed'), halted: report.halted.length });
  telemetry.flush();
  if (report.pathErrors.length > 0 || count('failed') > 0 || report.routes.some((r) => r.status === 'error'))
    throw new Error(
      `reconcile incomplete: ${report.pathErrors.length} path(s) unreadable, ${count('failed')} workload(s) failed (see the log lines above)`,
    );
  return summary;
}
