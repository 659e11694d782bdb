/**
 * The Lambda packages: `npm run package -- --stage prod` once (offline, into a temporary directory), then per
 * function the minified bundle's size and its cold start — a fresh `node` process that imports the bundle from the
 * unpacked zip and makes the first handler call with a minimal real event (an HTTP API v2 `GET /healthz`, an empty
 * SQS batch, a CloudWatch Logs CONTROL_MESSAGE), timed from spawn to exit, median of 20 processes — beside a bare
 * `node -e ''` process measured the same way, interleaved, in the same run.
 *
 * The handlers get a local routing table (the one in their zip) and dummy queue settings; none of these first
 * calls reaches AWS (no credentials are given, and the EC2 metadata endpoint is disabled, so one that tried would
 * fail the benchmark rather than hang).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { readZipEntries } from '../lib/deploy/zip-entries.ts';
import { median, round, type Figure } from './figures.ts';

export const FUNCTIONS = ['http', 'worker', 'logs'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SAMPLES = 20;
const BUNDLE_GOAL_KB = 1536; // 1.5 MB
const COLD_INIT_GOAL_MS = 250;

export interface PackageResult {
  dir: string;
  seconds: number;
  output: string;
}

/** The environment without any AWS credentials or profile: packaging must not need them. */
export function withoutAwsCredentials(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !/^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|PROFILE|DEFAULT_PROFILE|CONTAINER_CREDENTIALS_\w+|WEB_IDENTITY_TOKEN_FILE|ROLE_ARN)$/.test(k)) out[k] = v;
  return out;
}

/** `npm run package -- --stage STAGE --package DIR`, run through its script; throws with osls's output on failure. */
export function packageStage(stage: string, dir: string): PackageResult {
  const started = performance.now();
  const result = spawnSync(process.execPath, ['infra/serverless/package.js', '--stage', stage, '--package', dir], {
    cwd: REPO,
    encoding: 'utf8',
    timeout: 300_000,
    env: { ...withoutAwsCredentials(process.env), FORCE_COLOR: '0', NO_COLOR: '1' },
  });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.error) throw new Error(`packaging ${stage} failed to run: ${result.error.message}\n${output}`);
  if (result.status !== 0) throw new Error(`packaging ${stage} exited with ${result.status}:\n${output}`);
  return { dir, seconds: (performance.now() - started) / 1000, output };
}

/** Unpacks each function's zip into DIR/<function>/, as Lambda lays it out under /var/task. */
export function unpackFunctions(packageDir: string, into: string): Record<FunctionName, { root: string; bundle: string; zipBytes: number }> {
  const out = {} as Record<FunctionName, { root: string; bundle: string; zipBytes: number }>;
  for (const fn of FUNCTIONS) {
    const zip = readFileSync(join(packageDir, `${fn}.zip`));
    const root = join(into, fn);
    for (const entry of readZipEntries(zip)) {
      const target = join(root, entry.name);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, entry.data);
    }
    out[fn] = { root, bundle: join(root, 'functions', `${fn}.mjs`), zipBytes: zip.length };
  }
  return out;
}

/** The first event each handler gets: the smallest real shape of its trigger. */
export function firstEvents(): Record<FunctionName, unknown> {
  const timeEpoch = Date.UTC(2026, 10, 20, 10, 15, 2);
  return {
    http: {
      version: '2.0',
      routeKey: '$default',
      rawPath: '/healthz',
      rawQueryString: '',
      headers: { host: 'abc123.lambda-url.eu-west-1.on.aws', 'user-agent': 'bundle-bench' },
      requestContext: {
        accountId: '123456789012',
        apiId: 'abc123',
        domainName: 'abc123.lambda-url.eu-west-1.on.aws',
        domainPrefix: 'abc123',
        http: { method: 'GET', path: '/healthz', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'bundle-bench' },
        requestId: 'bundle-bench',
        routeKey: '$default',
        stage: '$default',
        time: '20/Nov/2026:10:15:02 +0000',
        timeEpoch,
      },
      isBase64Encoded: false,
    },
    worker: { Records: [] },
    logs: {
      awslogs: {
        data: gzipSync(
          JSON.stringify({
            messageType: 'CONTROL_MESSAGE',
            owner: 'CloudwatchLogs',
            logGroup: '',
            logStream: '',
            subscriptionFilters: [],
            logEvents: [{ id: '', timestamp: timeEpoch, message: 'CWL CONTROL MESSAGE: Checking health of destination Lambda function.' }],
          }),
        ).toString('base64'),
      },
    },
  };
}

/** The environment serverless.yml gives the functions, with local and dummy values; no AWS credentials. */
export function functionEnv(root: string, routes: string, home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    LAMBDA_TASK_ROOT: root,
    AWS_REGION: 'eu-west-1',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_LAMBDA_FUNCTION_NAME: 'vault-rollout-bench',
    VAULT_ROLLOUT_ROUTES: routes,
    VAULT_ROLLOUT_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout-bench-rollouts.fifo',
    VAULT_ROLLOUT_AUTH: 'hmac,bearer',
    VAULT_ROLLOUT_WEBHOOK_SECRET_SSM: '/vault-rollout/bench/webhook/hmac-secret',
    VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM: '/vault-rollout/bench/webhook/bearer-token',
    POWERTOOLS_SERVICE_NAME: 'vault-rollout',
    POWERTOOLS_METRICS_NAMESPACE: 'VaultRollout',
    POWERTOOLS_LOG_LEVEL: 'WARN',
  };
}

/** Imports the bundle, calls the handler once, reports the in-process time on a marked line, exits. */
const CHILD = `
const started = performance.now();
const [bundle, event] = process.argv.slice(1); // with -e, argv[1] is the first argument
const { handler } = await import(new URL('file://' + bundle).href);
const result = await handler(JSON.parse(event), { awsRequestId: 'bundle-bench', functionName: 'vault-rollout-bench', getRemainingTimeInMillis: () => 30000 });
process.stderr.write('\\n@@bundle-bench ' + JSON.stringify({ ms: performance.now() - started, result }) + '\\n');
process.exit(0);
`;

export interface ProcessSample {
  wallMs: number;
  inProcessMs?: number;
  result?: unknown;
  stderr: string;
  code: number | null;
}

/** One fresh process, timed from spawn to exit. */
export function timeProcess(args: readonly string[], env: Record<string, string>, cwd: string): Promise<ProcessSample> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const wallMs = performance.now() - started;
      const line = stderr.split('\n').find((l) => l.startsWith('@@bundle-bench '));
      const parsed = line === undefined ? undefined : (JSON.parse(line.slice('@@bundle-bench '.length)) as { ms: number; result: unknown });
      resolve({ wallMs, inProcessMs: parsed?.ms, result: parsed?.result, stderr, code });
    });
  });
}

/** Runs the cold start of one unpacked function once; throws unless the handler answered. */
export async function coldStart(fn: FunctionName, unpacked: { root: string; bundle: string }, routes: string, home: string): Promise<ProcessSample> {
  const event = JSON.stringify(firstEvents()[fn]);
  const sample = await timeProcess(['--input-type=module', '-e', CHILD, unpacked.bundle, event], functionEnv(unpacked.root, routes, home), unpacked.root);
  if (sample.code !== 0 || sample.inProcessMs === undefined) throw new Error(`cold start of ${fn} failed (exit ${sample.code}):\n${sample.stderr}`);
  return sample;
}

export async function bundleBench(): Promise<Figure[]> {
  const work = mkdtempSync(join(tmpdir(), 'vault-rollout-bundle-bench-'));
  try {
    const stage = 'prod';
    const pkg = packageStage(stage, join(work, 'package'));
    const unpacked = unpackFunctions(pkg.dir, join(work, 'task'));
    const home = join(work, 'home');
    mkdirSync(home);
    const routes = `infra/routes/${stage}.compiled.json`;

    const figures: Figure[] = [
      { name: 'package_s', value: round(pkg.seconds, 1), unit: 's', runs: 1, note: `npm run package -- --stage ${stage}: template and ${FUNCTIONS.length} zips, offline` },
    ];
    for (const fn of FUNCTIONS) {
      const kb = readFileSync(unpacked[fn].bundle).length / 1024;
      figures.push({
        name: `bundle_kb_${fn}`,
        value: round(kb, 0),
        unit: 'KB',
        goal: `<= ${BUNDLE_GOAL_KB}`,
        met: kb <= BUNDLE_GOAL_KB,
        runs: 1,
        note: `functions/${fn}.mjs, minified ESM; zip ${round(unpacked[fn].zipBytes / 1024, 0)} KB`,
      });
    }

    // Interleave: baseline, http, worker, logs, baseline, … so load changes hit every series alike.
    const baseline: number[] = [];
    const wall: Record<FunctionName, number[]> = { http: [], worker: [], logs: [] };
    const inside: Record<FunctionName, number[]> = { http: [], worker: [], logs: [] };
    for (let i = 0; i < SAMPLES; i++) {
      const bare = await timeProcess(['-e', ''], functionEnv(work, routes, home), work);
      if (bare.code !== 0) throw new Error(`node -e '' failed: ${bare.stderr}`);
      baseline.push(bare.wallMs);
      for (const fn of FUNCTIONS) {
        const sample = await coldStart(fn, unpacked[fn], routes, home);
        wall[fn].push(sample.wallMs);
        inside[fn].push(sample.inProcessMs ?? Number.NaN);
      }
    }
    const baselineMs = round(median(baseline), 1);
    // Process start-up times swing with the machine's load: say what it was.
    const load = `load average ${round(loadavg()[0] ?? 0, 1)} on ${cpus().length} CPUs`;
    for (const fn of FUNCTIONS) {
      const value = round(median(wall[fn]), 1);
      figures.push({
        name: `cold_init_ms_${fn}`,
        value,
        unit: 'ms',
        goal: `<= ${COLD_INIT_GOAL_MS}`,
        met: value <= COLD_INIT_GOAL_MS,
        baseline: { name: "node -e '' process", value: baselineMs },
        spread: [round(Math.min(...wall[fn]), 1), round(Math.max(...wall[fn]), 1)],
        runs: SAMPLES,
        note: `fresh node process: spawn, import the bundle, first handler call, exit; in-process import + call ${round(median(inside[fn]), 1)} ms; ${load}`,
      });
    }
    return figures;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// `node bench/bundle-bench.ts` runs it alone.
if (import.meta.filename === process.argv[1]) {
  for (const f of await bundleBench()) process.stdout.write(`${JSON.stringify(f)}\n`);
}
