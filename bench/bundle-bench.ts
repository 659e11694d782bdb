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
import { compileRoutingTable } from '../lib/routing/compiled-table.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { syntheticRoutes } from './plan-bench.ts';
import { buildFloor } from './cold-floor/build.ts';

export const FUNCTIONS = ['http', 'worker', 'logs'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

const REPO = fileURLToPath(new URL('..', import.meta.url));
const SAMPLES = size(20, 2);
const BUNDLE_GOAL_KB = 1536; // 1.5 MB
/** The goal: cold init within 3x a bare `node -e ''`, and 10,000 routes within 1.3x of 10. */
const COLD_INIT_GOAL_RATIO = 3;
const BIG_TABLE_GOAL_RATIO = 1.3;
const SMALL_ROUTES = 10;
const BIG_ROUTES = size(10_000, 200);
/** The goal: the compiled table loads within 2x a bare JSON.parse of the same file, with at most 100 MB more. */
const TABLE_LOAD_GOAL_RATIO = 2;
const TABLE_LOAD_GOAL_EXTRA_MB = 100;
const TABLE_SAMPLES = size(7, 1);
/** What each floor (bench/cold-floor) is made of, for the notes. */
const FLOOR_PARTS: Record<FunctionName, string> = {
  http: 'hono and its Lambda adapter, zod, the SQS, SSM and DynamoDB clients, Powertools',
  worker: 'zod, the SQS, DynamoDB, EKS, STS, SSM and Secrets Manager clients, client-node KubeConfig, Powertools',
  logs: 'zlib, zod, the SQS, SSM and DynamoDB clients, Powertools',
};

export interface PackageResult {
  dir: string;
  seconds: number;
  output: string;
}

/** The environment without any AWS credentials or profile: packaging must not need them. */
export function withoutAwsCredentials(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env))
    if (
      v !== undefined &&
      !/^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|PROFILE|DEFAULT_PROFILE|CONTAINER_CREDENTIALS_\w+|WEB_IDENTITY_TOKEN_FILE|ROLE_ARN)$/.test(
        k,
      )
    )
      out[k] = v;
  return out;
}

/**
 * `npm run package -- --stage STAGE --package DIR --param samples=allow`, run through its script: the sample values
 * and routing tables of the repository, knowingly (a real deploy sets its own); throws with osls's output on failure.
 */
export function packageStage(stage: string, dir: string): PackageResult {
  const started = performance.now();
  const result = spawnSync(
    process.execPath,
    ['infra/serverless/package.js', '--stage', stage, '--package', dir, '--param', 'samples=allow'],
    {
      cwd: REPO,
      encoding: 'utf8',
      timeout: 300_000,
      env: { ...withoutAwsCredentials(process.env), FORCE_COLOR: '0', NO_COLOR: '1' },
    },
  );
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.error) throw new Error(`packaging ${stage} failed to run: ${result.error.message}\n${output}`);
  if (result.status !== 0) throw new Error(`packaging ${stage} exited with ${result.status}:\n${output}`);
  return { dir, seconds: (performance.now() - started) / 1000, output };
}

/** Unpacks each function's zip into DIR/<function>/, as Lambda lays it out under /var/task. */
export function unpackFunctions(
  packageDir: string,
  into: string,
): Record<FunctionName, { root: string; bundle: string; zipBytes: number }> {
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
        http: {
          method: 'GET',
          path: '/healthz',
          protocol: 'HTTP/1.1',
          sourceIp: '127.0.0.1',
          userAgent: 'bundle-bench',
        },
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
            logEvents: [
              {
                id: '',
                timestamp: timeEpoch,
                message: 'CWL CONTROL MESSAGE: Checking health of destination Lambda function.',
              },
            ],
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
      const parsed =
        line === undefined
          ? undefined
          : (JSON.parse(line.slice('@@bundle-bench '.length)) as { ms: number; result: unknown });
      resolve({ wallMs, inProcessMs: parsed?.ms, result: parsed?.result, stderr, code });
    });
  });
}

/** Runs the cold start of one unpacked function once; throws unless the handler answered. */
export async function coldStart(
  fn: FunctionName,
  unpacked: { root: string; bundle: string },
  routes: string,
  home: string,
): Promise<ProcessSample> {
  const event = JSON.stringify(firstEvents()[fn]);
  const sample = await timeProcess(
    ['--input-type=module', '-e', CHILD, unpacked.bundle, event],
    functionEnv(unpacked.root, routes, home),
    unpacked.root,
  );
  if (sample.code !== 0 || sample.inProcessMs === undefined)
    throw new Error(`cold start of ${fn} failed (exit ${sample.code}):\n${sample.stderr}`);
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
    // The worker's table (with the kubeconfigs); the intake functions are packaged with the intake's table only.
    const routesOf = (fn: FunctionName) => (fn === 'worker' ? routes : `infra/routes/${stage}.intake.compiled.json`);

    const figures: Figure[] = [
      {
        name: 'package_s',
        value: round(pkg.seconds, 1),
        unit: 's',
        runs: 1,
        note: `npm run package -- --stage ${stage}: template and ${FUNCTIONS.length} zips, offline`,
      },
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

    // The same synthetic tables as the plan benchmark, 10 and 10,000 routes, compiled as `package` compiles them
    // and put beside each unpacked bundle.
    const tables: Record<'small' | 'big', string> = {
      small: `routes-${SMALL_ROUTES}.compiled.json`,
      big: `routes-${BIG_ROUTES}.compiled.json`,
    };
    const compiledText = {
      small: compileRoutingTable(syntheticRoutes(SMALL_ROUTES), 'routes.yaml'),
      big: compileRoutingTable(syntheticRoutes(BIG_ROUTES), 'routes.yaml'),
    };
    for (const fn of FUNCTIONS)
      for (const size of ['small', 'big'] as const)
        writeFileSync(join(unpacked[fn].root, tables[size]), compiledText[size]);

    // Interleave: baseline, then each function with each table, … so load changes hit every series alike.
    const baseline: number[] = [];
    const wall: Record<FunctionName, Record<'small' | 'big' | 'stage', number[]>> = {
      http: { small: [], big: [], stage: [] },
      worker: { small: [], big: [], stage: [] },
      logs: { small: [], big: [], stage: [] },
    };
    const inside: Record<FunctionName, number[]> = { http: [], worker: [], logs: [] };
    // Each function's floor: its third-party parts alone (bench/cold-floor), bundled as serverless.yml bundles it.
    const floors = {} as Record<FunctionName, { root: string; bundle: string }>;
    for (const fn of FUNCTIONS) {
      const root = join(work, 'floor', fn);
      floors[fn] = { root, bundle: await buildFloor(fn, root) };
    }
    const floorWall: Record<FunctionName, number[]> = { http: [], worker: [], logs: [] };
    for (let i = 0; i < SAMPLES; i++) {
      const bare = await timeProcess(['-e', ''], functionEnv(work, routes, home), work);
      if (bare.code !== 0) throw new Error(`node -e '' failed: ${bare.stderr}`);
      baseline.push(bare.wallMs);
      for (const fn of FUNCTIONS) {
        const sample = await coldStart(fn, unpacked[fn], routesOf(fn), home);
        wall[fn].stage.push(sample.wallMs);
        inside[fn].push(sample.inProcessMs ?? Number.NaN);
        for (const size of ['small', 'big'] as const)
          wall[fn][size].push((await coldStart(fn, unpacked[fn], tables[size], home)).wallMs);
        floorWall[fn].push((await coldStart(fn, floors[fn], routesOf(fn), home)).wallMs);
      }
    }
    const baselineMs = round(median(baseline), 1);
    // Process start-up times swing with the machine's load: say what it was.
    const load = `load average ${round(loadavg()[0] ?? 0, 1)} on ${cpus().length} CPUs`;
    const spread = (xs: number[]): [number, number] => [round(Math.min(...xs), 1), round(Math.max(...xs), 1)];
    for (const fn of FUNCTIONS) {
      const value = round(median(wall[fn].stage), 1);
      const small = round(median(wall[fn].small), 1);
      const big = round(median(wall[fn].big), 1);
      const ratio = round(value / baselineMs);
      const floor = round(median(floorWall[fn]), 1);
      const floorRatio = round(floor / baselineMs);
      figures.push(
        {
          name: `cold_init_ms_${fn}`,
          value,
          unit: 'ms',
          baseline: { name: "node -e '' process", value: baselineMs },
          spread: spread(wall[fn].stage),
          runs: SAMPLES,
          note: `fresh node process: spawn, import the bundle, first handler call, exit; the ${stage} table, compiled; in-process import + call ${round(median(inside[fn]), 1)} ms; ${load}`,
        },
        {
          name: `cold_init_ratio_${fn}`,
          value: ratio,
          unit: "× node -e ''",
          goal: `<= ${COLD_INIT_GOAL_RATIO}`,
          met: ratio <= COLD_INIT_GOAL_RATIO,
          runs: SAMPLES,
          note: `cold_init_ms_${fn} / the node -e '' process, same run; the floor of its third-party parts alone is ${floorRatio}x`,
        },
        {
          name: `cold_init_floor_ms_${fn}`,
          value: floor,
          unit: 'ms',
          baseline: { name: "node -e '' process", value: baselineMs },
          spread: spread(floorWall[fn]),
          runs: SAMPLES,
          note: `bench/cold-floor/${fn}.ts: the third-party parts of the function (${FLOOR_PARTS[fn]}) with none of vault-rollout's code, bundled with serverless.yml's esbuild settings and started the same way; ${floorRatio}x node -e ''`,
        },
        {
          name: `cold_init_floor_ratio_${fn}`,
          value: floorRatio,
          unit: "× node -e ''",
          runs: SAMPLES,
          note: `cold_init_floor_ms_${fn} / the node -e '' process, same run: what is left when vault-rollout's own code costs nothing`,
        },
        {
          name: `cold_init_ms_${fn}_${BIG_ROUTES}_routes`,
          value: big,
          unit: 'ms',
          goal: `<= ${round(BIG_TABLE_GOAL_RATIO * small, 1)} (${BIG_TABLE_GOAL_RATIO}x the ${SMALL_ROUTES}-route figure)`,
          met: big <= BIG_TABLE_GOAL_RATIO * small,
          baseline: { name: `the same with ${SMALL_ROUTES} routes`, value: small },
          spread: spread(wall[fn].big),
          runs: SAMPLES,
          note: `synthetic tables of the plan benchmark, compiled (${round(compiledText.big.length / 2 ** 20, 1)} MB JSON); ratio ${round(big / small)}x; ${SMALL_ROUTES}-route spread ${spread(wall[fn].small).join('–')}`,
        },
      );
    }
    figures.push(...tableLoad(work, compiledText.big));
    return figures;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The 10,000-route table loaded in fresh processes: compiled (a function's cold start) and YAML (before), each
 * beside a bare JSON.parse of the compiled file, interleaved; time and RSS added by the load.
 */
function tableLoad(work: string, compiledText: string): Figure[] {
  const compiledFile = join(work, 'table-load.compiled.json');
  const yamlFile = join(work, 'table-load.yaml');
  writeFileSync(compiledFile, compiledText);
  writeFileSync(yamlFile, syntheticRoutes(BIG_ROUTES));
  const child = fileURLToPath(new URL('./table-load-child.ts', import.meta.url));
  const run = (mode: string, file: string) =>
    JSON.parse(spawnSync(process.execPath, [child, mode, file], { encoding: 'utf8', timeout: 120_000 }).stdout) as {
      ms: number;
      addedMb: number;
      peakMb: number;
    };
  const series: Record<'json' | 'compiled' | 'yaml', Array<{ ms: number; addedMb: number }>> = {
    json: [],
    compiled: [],
    yaml: [],
  };
  for (let i = 0; i < TABLE_SAMPLES; i++) {
    series.json.push(run('json', compiledFile));
    series.compiled.push(run('compiled', compiledFile));
    if (i < 3) series.yaml.push(run('yaml', yamlFile));
  }
  const ms = (m: keyof typeof series) => series[m].map((s) => s.ms);
  const mb = (m: keyof typeof series) => round(median(series[m].map((s) => s.addedMb)), 1);
  const jsonMs = round(median(ms('json')), 1);
  const compiledMs = round(median(ms('compiled')), 1);
  const ratios = series.compiled.map((s, i) => s.ms / (series.json[i]?.ms ?? Number.NaN));
  const extraMb = round(mb('compiled') - mb('json'), 1);
  const size = `${BIG_ROUTES} routes, ${round(compiledText.length / 2 ** 20, 1)} MB compiled JSON`;
  return [
    {
      name: 'table_load_ms',
      value: compiledMs,
      unit: 'ms',
      baseline: { name: 'bare JSON.parse of the same file', value: jsonMs },
      spread: [round(Math.min(...ms('compiled')), 1), round(Math.max(...ms('compiled')), 1)],
      runs: TABLE_SAMPLES,
      note: `${size}; JSON.parse + compilation (trie, targets), fresh process each`,
    },
    {
      name: 'table_load_ratio_to_json_parse',
      value: round(compiledMs / jsonMs),
      unit: '× JSON.parse',
      goal: `<= ${TABLE_LOAD_GOAL_RATIO}`,
      met: compiledMs / jsonMs <= TABLE_LOAD_GOAL_RATIO,
      spread: [round(Math.min(...ratios)), round(Math.max(...ratios))],
      runs: TABLE_SAMPLES,
      note: 'medians of interleaved fresh processes; spread of the per-pair ratios',
    },
    {
      name: 'table_load_extra_mb',
      value: extraMb,
      unit: 'MB RSS over JSON.parse',
      goal: `<= ${TABLE_LOAD_GOAL_EXTRA_MB}`,
      met: extraMb <= TABLE_LOAD_GOAL_EXTRA_MB,
      baseline: { name: 'RSS JSON.parse adds', value: mb('json') },
      runs: TABLE_SAMPLES,
      note: `RSS added by the load, median; ${size}`,
    },
    {
      name: 'table_load_yaml_ms',
      value: round(median(ms('yaml')), 1),
      unit: 'ms',
      baseline: { name: 'bare JSON.parse of the compiled file', value: jsonMs },
      spread: [round(Math.min(...ms('yaml')), 1), round(Math.max(...ms('yaml')), 1)],
      runs: series.yaml.length,
      note: `before: YAML + schema + checks at every cold start (${size}); RSS added ${mb('yaml')} MB; now only at npm run package`,
    },
  ];
}

// `node bench/bundle-bench.ts` runs it alone.
if (import.meta.filename === process.argv[1]) {
  for (const f of await bundleBench()) process.stdout.write(`${JSON.stringify(f)}\n`);
}
