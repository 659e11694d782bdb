/**
 * `npm run package` for every stage, offline and without AWS credentials, then the CloudFormation template and the
 * zips it wrote: cfn-lint (installed by this test into a per-user venv), the runtime, one ESM bundle per function
 * that loads and answers, the FIFO queue with its dead-letter queue, the event source mapping, alarms, log
 * retention, and IAM — one role per function, no wildcard resource, the cluster ARNs exactly those of the stage's
 * routing table.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coldStart, FUNCTIONS, packageStage, unpackFunctions, type FunctionName } from '../../bench/bundle-bench.ts';
import { dashboardBodySub } from '../../lib/deploy/cloudwatch-dashboard.ts';
import { workerBatchSize } from '../../lib/deploy/worker-batch-size.ts';
import { readZipEntries } from '../../lib/deploy/zip-entries.ts';
import { loadCompiledRoutingTable } from '../../lib/routing/compiled-table.ts';
import { tableShape } from '../unit/routing/table-shape.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { readRepoFile, repoRoot } from '../helpers.ts';

/** The version test/requirements/cfn-lint.txt pins. */
const CFN_LINT_VERSION =
  /^cfn-lint==(\S+)/m.exec(readRepoFile('test/requirements/cfn-lint.txt'))?.[1] ??
  'missing from test/requirements/cfn-lint.txt';
/** osls writes `DependsOn` on a function's role next to the `Fn::GetAtt` of it (W3005, redundant, harmless). */
const CFN_LINT_IGNORED = ['W3005'];

const STAGES = ['dev', 'staging', 'prod'] as const;
type Stage = (typeof STAGES)[number];

/** What serverless.yml's params say per stage, checked against the template. */
const EXPECTED: Record<
  Stage,
  {
    retention: number;
    frontend: 'url-none' | 'url-iam' | 'http-api';
    alarm: 'email' | string;
    auditLogGroup: string;
    webhook: boolean;
  }
> = {
  dev: { retention: 7, frontend: 'url-none', alarm: 'email', auditLogGroup: '/vault/dev/audit', webhook: true },
  staging: {
    retention: 14,
    frontend: 'url-iam',
    alarm: 'arn:aws:sns:eu-west-1:123456789012:vault-rollout-staging-alarms',
    auditLogGroup: '/vault/staging/audit',
    webhook: false,
  },
  prod: {
    retention: 90,
    frontend: 'http-api',
    alarm: 'arn:aws:sns:eu-west-1:123456789012:ops-pager',
    auditLogGroup: '/vault/prod/audit',
    webhook: true,
  },
};

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties?: Json;
  DependsOn?: string | string[];
}
interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, Json>;
}
interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource?: unknown;
  NotResource?: unknown;
}

/**
 * cfn-lint from PyPI in a venv under ~/.cache, installed once by test/requirements/install-venv.sh (exactly
 * test/requirements/cfn-lint.txt, every file checked against its pinned SHA-256); fails (never skips) if it cannot
 * be installed.
 */
function ensureCfnLint(): string {
  const r = spawnSync(
    'bash',
    [join(repoRoot, 'test/requirements/install-venv.sh'), 'cfn-lint', 'bin/cfn-lint', '--version'],
    { encoding: 'utf8', timeout: 300_000 },
  );
  const venv = r.stdout?.trim() ?? '';
  if (r.status !== 0 || venv === '') {
    throw new Error(
      `cfn-lint ${CFN_LINT_VERSION} could not be installed (needs python3 with venv and access to PyPI): ` +
        `test/requirements/install-venv.sh cfn-lint -> ${r.error?.message ?? `exit ${r.status}`}\n${r.stdout ?? ''}${r.stderr ?? ''}`,
    );
  }
  const bin = join(venv, 'bin', 'cfn-lint');
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  if (!version.includes(CFN_LINT_VERSION))
    throw new Error(
      `${bin} says ${JSON.stringify(version.trim())}, expected cfn-lint ${CFN_LINT_VERSION} (test/requirements/cfn-lint.txt)`,
    );
  return bin;
}

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-package-test-'));
const packages = {} as Record<Stage, { dir: string; template: Template; seconds: number }>;
let cfnLint = '';

beforeAll(() => {
  cfnLint = ensureCfnLint();
  // One after another: serverless-esbuild shares its work folder (.esbuild/) between runs.
  for (const stage of STAGES) {
    const { dir, seconds } = packageStage(stage, join(work, stage));
    packages[stage] = {
      dir,
      seconds,
      template: JSON.parse(readFileSync(join(dir, 'cloudformation-template-update-stack.json'), 'utf8')) as Template,
    };
  }
}, 900_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const resourcesOf = (t: Template, type: string) => Object.entries(t.Resources).filter(([, r]) => r.Type === type);
const props = (t: Template, id: string): Json => {
  const r = t.Resources[id];
  if (r === undefined) throw new Error(`no resource ${id}`);
  return r.Properties ?? {};
};
const asArray = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const logicalId = (fn: FunctionName) => `${fn[0]?.toUpperCase()}${fn.slice(1)}`;

/** Every IAM statement in the template, with where it is: inline role policies and standalone policies. */
function statementsOf(t: Template): Array<{ where: string; statement: Statement }> {
  const out: Array<{ where: string; statement: Statement }> = [];
  for (const [id, r] of Object.entries(t.Resources)) {
    const p = r.Properties ?? {};
    const documents: Array<[string, unknown]> = [];
    if (r.Type === 'AWS::IAM::Role')
      for (const pol of asArray(p.Policies as Array<{ PolicyName: string; PolicyDocument: unknown }>))
        documents.push([`${id}/${pol.PolicyName}`, pol.PolicyDocument]);
    if (r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy' || r.Type === 'AWS::IAM::RolePolicy')
      documents.push([id, p.PolicyDocument]);
    for (const [where, doc] of documents)
      for (const statement of asArray((doc as { Statement?: Statement | Statement[] }).Statement))
        out.push({ where, statement });
  }
  return out;
}

/** The functions that reach clusters, and so get kubeconfigs: the worker (restarts) and reconcile (reads, records). */
const REACHES_CLUSTERS: ReadonlySet<string> = new Set(['worker', 'reconcile']);

const GUARDED = /^(eks|sts|ssm|secretsmanager|sqs|sns|kms|logs):|^\*$/;

describe.each(STAGES)('npm run package -- --stage %s', (stage) => {
  /** The table a function loads: the full one where it reaches clusters, else the intake's (no kubeconfigs). */
  const routesOf = (fn: FunctionName) =>
    REACHES_CLUSTERS.has(fn) ? `infra/routes/${stage}.compiled.json` : `infra/routes/${stage}.intake.compiled.json`;
  const t = () => packages[stage].template;
  const expected = EXPECTED[stage];
  const table = loadRoutingTable(readRepoFile(`infra/routes/${stage}.yaml`), `${stage}.yaml`);

  it('passes cfn-lint', () => {
    const file = join(packages[stage].dir, 'cloudformation-template-update-stack.json');
    const r = spawnSync(cfnLint, ['--regions', 'eu-west-1', '--ignore-checks', ...CFN_LINT_IGNORED, '--', file], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.error).toBeUndefined();
    expect(`${r.stdout}${r.stderr}`.trim()).toBe('');
    expect(r.status).toBe(0);
  });

  it('runs every function on nodejs24.x (arm64), each from its own zip with its ESM bundle and the routing table', () => {
    const lambdas = resourcesOf(t(), 'AWS::Lambda::Function');
    expect(lambdas.map(([id]) => id).sort()).toEqual([
      'HttpLambdaFunction',
      'LogsLambdaFunction',
      'NotifyLambdaFunction',
      'ReconcileLambdaFunction',
      'WorkerLambdaFunction',
    ]);
    expect(
      readdirSync(packages[stage].dir)
        .filter((f) => f.endsWith('.zip'))
        .sort(),
    ).toEqual(['http.zip', 'logs.zip', 'notify.zip', 'reconcile.zip', 'worker.zip']);
    for (const fn of FUNCTIONS) {
      const p = props(t(), `${logicalId(fn)}LambdaFunction`);
      expect(p.Runtime).toBe('nodejs24.x');
      expect(p.Architectures).toEqual(['arm64']);
      expect(p.Handler).toBe(`functions/${fn}.handler`);
      expect((p.Code as { S3Key: string }).S3Key).toMatch(new RegExp(`/${fn}\\.zip$`));
      const entries = readZipEntries(readFileSync(join(packages[stage].dir, `${fn}.zip`)));
      // Only the functions that reach clusters get the full table (and any kubeconfig file it names); the intake's
      // table has no file or inline kubeconfig (test/unit/deploy/function-packages.test.ts).
      expect(entries.map((e) => e.name).sort()).toEqual(
        REACHES_CLUSTERS.has(fn)
          ? [`functions/${fn}.mjs`, `infra/routes/${stage}.compiled.json`, `infra/routes/${stage}.intake.compiled.json`]
          : [`functions/${fn}.mjs`, `infra/routes/${stage}.intake.compiled.json`],
      );
      // The tables a non-cluster function carries name no file or inline kubeconfig (its bundle's code may well say "inline").
      if (!REACHES_CLUSTERS.has(fn))
        for (const e of entries.filter((x) => x.name.endsWith('.json')))
          expect(e.data.toString()).not.toMatch(/"inline"|kubeconfig"\s*:\s*\{\s*"file"/);
      // The YAML, checked and compiled: the function loads the same table without parsing YAML.
      const compiled = entries.find((e) => e.name === routesOf(fn))?.data.toString() ?? '';
      expect(tableShape(loadCompiledRoutingTable(compiled, routesOf(fn)))).toEqual(
        tableShape(loadRoutingTable(readRepoFile(`infra/routes/${stage}.yaml`), routesOf(fn))),
      );
      const bundle = entries.find((e) => e.name.endsWith('.mjs'))?.data.toString() ?? '';
      // ESM: an .mjs file with an export statement, a require() for CommonJS dependencies from createRequire.
      expect(bundle).toMatch(/export\s*\{[^}]*\bhandler\b[^}]*\}/);
      expect(bundle.startsWith("import { createRequire as __vrCreateRequire } from 'node:module'")).toBe(true);
      expect(bundle.length).toBeLessThanOrEqual(1.5 * 1024 * 1024);
      // The intake functions carry no YAML parser (the table is compiled); the worker keeps one for kubeconfigs.
      expect(bundle.includes('YAMLParseError')).toBe(fn === 'worker');
      if (fn !== 'worker') expect(bundle).toContain('the Lambda functions load the compiled routing table');
      const env = (p.Environment as { Variables: Record<string, unknown> }).Variables;
      expect(env).toMatchObject({
        VAULT_ROLLOUT_ROUTES: routesOf(fn),
        VAULT_ROLLOUT_QUEUE_URL: { Ref: 'RolloutQueue' },
        POWERTOOLS_SERVICE_NAME: 'vault-rollout',
        POWERTOOLS_METRICS_NAMESPACE: `VaultRollout/${stage}`,
      });
      expect(env.POWERTOOLS_LOG_LEVEL).toMatch(/^(DEBUG|INFO|WARN|ERROR)$/);
    }
    const httpEnv = (props(t(), 'HttpLambdaFunction').Environment as { Variables: Record<string, unknown> }).Variables;
    expect(httpEnv).toMatchObject({
      VAULT_ROLLOUT_AUTH: expected.frontend === 'url-iam' ? 'iam' : 'hmac,bearer',
      VAULT_ROLLOUT_WEBHOOK_SECRET_SSM: `/vault-rollout/${stage}/webhook/hmac-secret`,
      VAULT_ROLLOUT_WEBHOOK_TOKEN_SSM: `/vault-rollout/${stage}/webhook/bearer-token`,
    });
    // Key-level restarts: both intakes keep key baselines in the rotation table.
    for (const fn of ['HttpLambdaFunction', 'LogsLambdaFunction'])
      expect(
        (props(t(), fn).Environment as { Variables: Record<string, unknown> }).Variables.VAULT_ROLLOUT_STATE_TABLE,
      ).toEqual({ Ref: 'RotationStateTable' });
  });

  it('bundles that Node loads as ESM and whose handlers answer their first event offline', async () => {
    const unpacked = unpackFunctions(packages[stage].dir, join(work, `${stage}-task`));
    const home = mkdtempSync(join(work, 'home-'));
    const results: Partial<Record<FunctionName, unknown>> = {};
    for (const fn of FUNCTIONS) results[fn] = (await coldStart(fn, unpacked[fn], routesOf(fn), home)).result;
    expect(results.http).toMatchObject({ statusCode: 200 });
    expect(results.worker).toEqual({ batchItemFailures: [] });
    expect(results.logs).toMatchObject({ ignored: 1, rejected: 0, queued: 0 });
  });

  it('has a FIFO queue with app-supplied deduplication ids, redriven to a FIFO dead-letter queue', () => {
    const queue = props(t(), 'RolloutQueue');
    const dlq = props(t(), 'RolloutDeadLetterQueue');
    expect(queue).toMatchObject({ FifoQueue: true, ContentBasedDeduplication: false, SqsManagedSseEnabled: true });
    expect(queue.QueueName).toBe(`vault-rollout-${stage}-rollouts.fifo`);
    expect(queue.RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'Arn'] },
      maxReceiveCount: 5,
    });
    expect(dlq).toMatchObject({
      FifoQueue: true,
      QueueName: `vault-rollout-${stage}-rollouts-dlq.fifo`,
      MessageRetentionPeriod: 1209600,
    });
    const workerTimeout = props(t(), 'WorkerLambdaFunction').Timeout as number;
    expect(queue.VisibilityTimeout as number).toBeGreaterThanOrEqual(6 * workerTimeout);
  });

  it('lets only the intake send to the queue and only the worker consume it, on the queue itself', () => {
    const policy = props(t(), 'RolloutQueuePolicy');
    expect(policy.Queues).toEqual([{ Ref: 'RolloutQueue' }]);
    const statements = (policy.PolicyDocument as { Statement: Statement[] }).Statement;
    const account = { AWS: { 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:root' } };
    const role = (id: string) => ({ 'Fn::GetAtt': [id, 'Arn'] });
    expect(statements).toEqual([
      expect.objectContaining({
        Effect: 'Deny',
        Principal: account,
        Action: 'sqs:SendMessage',
        Resource: role('RolloutQueue'),
        Condition: {
          ArnNotEquals: {
            'aws:PrincipalArn': [role('HttpRole'), role('LogsRole'), role('WorkerRole'), role('ReconcileRole')],
          },
        },
      }),
      expect.objectContaining({
        Effect: 'Deny',
        Principal: account,
        Action: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'],
        Resource: role('RolloutQueue'),
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': [role('WorkerRole')] } },
      }),
    ]);
    expect(JSON.stringify(statements)).not.toContain('"*"');
    // A refused (forged) message is alarmed.
    expect(props(t(), 'RefusedMessagesAlarm')).toMatchObject({
      Namespace: `VaultRollout/${stage}`,
      MetricName: 'RefusedMessages',
      Threshold: 0,
    });
  });

  it('lets only the rollout queue dead-letter to its DLQ, and only the worker send to it', () => {
    const dlq = props(t(), 'RolloutDeadLetterQueue');
    const sourceArn = {
      'Fn::Join': [
        ':',
        [
          'arn',
          { Ref: 'AWS::Partition' },
          'sqs',
          { Ref: 'AWS::Region' },
          { Ref: 'AWS::AccountId' },
          `vault-rollout-${stage}-rollouts.fifo`,
        ],
      ],
    };
    expect(dlq.RedriveAllowPolicy).toEqual({ redrivePermission: 'byQueue', sourceQueueArns: [sourceArn] });
    const policy = props(t(), 'RolloutDeadLetterQueuePolicy');
    expect(policy.Queues).toEqual([{ Ref: 'RolloutDeadLetterQueue' }]);
    const account = { AWS: { 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:root' } };
    expect((policy.PolicyDocument as { Statement: Statement[] }).Statement).toEqual([
      expect.objectContaining({
        Effect: 'Deny',
        Principal: account,
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'Arn'] },
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': [{ 'Fn::GetAtt': ['WorkerRole', 'Arn'] }] } },
      }),
    ]);
  });

  it('feeds the worker from the queue with ReportBatchItemFailures', () => {
    const mappings = resourcesOf(t(), 'AWS::Lambda::EventSourceMapping').filter(([, m]) =>
      JSON.stringify(m.Properties?.FunctionName).includes('WorkerLambdaFunction'),
    );
    expect(mappings).toHaveLength(1);
    const [, mapping] = mappings[0] ?? [];
    expect(mapping?.Properties).toMatchObject({
      EventSourceArn: { 'Fn::GetAtt': ['RolloutQueue', 'Arn'] },
      FunctionName: { 'Fn::GetAtt': ['WorkerLambdaFunction', 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      Enabled: true,
    });
    // param workerBatchSize auto: 10 when the stage's table settles bursts, else 1 (lib/deploy/worker-batch-size.ts).
    expect(mapping?.Properties?.BatchSize).toBe(workerBatchSize(table, 'auto'));
    // The mapping's maximum concurrency stays within the worker's reserved concurrency: no throttled batches.
    const max = (mapping?.Properties?.ScalingConfig as { MaximumConcurrency: number }).MaximumConcurrency;
    expect(max).toBeLessThanOrEqual(props(t(), 'WorkerLambdaFunction').ReservedConcurrentExecutions as number);
  });

  it("feeds the notify function from the rotation-state table's stream: keys only, new outbox deliveries only, bounded retries, bisected", () => {
    const state = props(t(), 'RotationStateTable');
    expect(state).toMatchObject({
      StreamSpecification: { StreamViewType: 'KEYS_ONLY' },
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    });
    expect(state.GlobalSecondaryIndexes).toEqual([
      {
        IndexName: 'outbox-due',
        KeySchema: [
          { AttributeName: 'outboxDue', KeyType: 'HASH' },
          { AttributeName: 'dueAt', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
    ]);
    const mappings = resourcesOf(t(), 'AWS::Lambda::EventSourceMapping').filter(([, m]) =>
      JSON.stringify(m.Properties?.FunctionName).includes('NotifyLambdaFunction'),
    );
    expect(mappings).toHaveLength(1);
    const p = mappings[0]?.[1].Properties ?? {};
    expect(p).toMatchObject({
      EventSourceArn: { 'Fn::GetAtt': ['RotationStateTable', 'StreamArn'] },
      StartingPosition: 'TRIM_HORIZON',
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      MaximumRecordAgeInSeconds: 3600,
    });
    const patterns = (p.FilterCriteria as { Filters: Array<{ Pattern: string }> }).Filters.map(
      (f) => JSON.parse(f.Pattern) as unknown,
    );
    expect(patterns).toEqual([
      {
        eventName: ['INSERT'],
        dynamodb: { Keys: { pk: { S: [{ prefix: 'notify#' }] }, sk: { S: [{ prefix: 'sink#' }] } } },
      },
    ]);
    expect(
      (props(t(), 'NotifyLambdaFunction').Environment as { Variables: Record<string, unknown> }).Variables,
    ).toMatchObject({
      VAULT_ROLLOUT_STATE_TABLE: { Ref: 'RotationStateTable' },
      VAULT_ROLLOUT_NOTIFY_SSM_PREFIX: `/vault-rollout/${stage}/notify`,
    });
    // Its parallel batches per shard stay within its reserved concurrency.
    expect(p.ParallelizationFactor as number).toBeLessThanOrEqual(
      props(t(), 'NotifyLambdaFunction').ReservedConcurrentExecutions as number,
    );
  });

  it("subscribes the logs function to the stage's Vault audit log group, with an on-failure queue", () => {
    const filters = resourcesOf(t(), 'AWS::Logs::SubscriptionFilter');
    expect(filters.map(([, f]) => [f.Properties?.LogGroupName, f.Properties?.DestinationArn])).toEqual([
      [expected.auditLogGroup, { 'Fn::GetAtt': ['LogsLambdaFunction', 'Arn'] }],
    ]);
    const [[, config] = []] = resourcesOf(t(), 'AWS::Lambda::EventInvokeConfig');
    expect(config?.Properties).toMatchObject({
      FunctionName: { Ref: 'LogsLambdaFunction' },
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': ['LogsFailureQueue', 'Arn'] } } },
    });
  });

  it("keeps each function's logs for the stage's retention", () => {
    for (const fn of FUNCTIONS) {
      expect(props(t(), `${logicalId(fn)}LogGroup`)).toEqual({
        LogGroupName: `/aws/lambda/vault-rollout-${stage}-${fn}`,
        RetentionInDays: expected.retention,
      });
      expect(t().Resources[`${logicalId(fn)}LambdaFunction`]?.DependsOn).toContain(`${logicalId(fn)}LogGroup`);
    }
  });

  it("alarms on the dead-letter queue depth and on worker errors, to the stage's alarm target", () => {
    const alarms = Object.fromEntries(
      resourcesOf(t(), 'AWS::CloudWatch::Alarm').map(([id, r]) => [id, r.Properties ?? {}]),
    );
    expect(alarms.DeadLetterQueueDepthAlarm).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'QueueName'] } }],
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(alarms.WorkerErrorsAlarm).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: 'WorkerLambdaFunction' } }],
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    const target = expected.alarm === 'email' ? { Ref: 'AlarmTopic' } : expected.alarm;
    for (const [id, alarm] of Object.entries(alarms)) expect([id, alarm.AlarmActions]).toEqual([id, [target]]);
    const subscriptions = resourcesOf(t(), 'AWS::SNS::Subscription').map(([, r]) => r.Properties);
    expect(subscriptions).toEqual(
      expected.alarm === 'email'
        ? [{ TopicArn: { Ref: 'AlarmTopic' }, Protocol: 'email', Endpoint: 'vault-rollout-dev@example.com' }]
        : [],
    );
  });

  it("has the stage's CloudWatch dashboard of the metrics its functions write (test/unit/deploy/cloudwatch-dashboard.test.ts)", () => {
    const namespace = `VaultRollout/${stage}`;
    expect(resourcesOf(t(), 'AWS::CloudWatch::Dashboard').map(([id]) => id)).toEqual(['Dashboard']);
    expect(props(t(), 'Dashboard')).toEqual({
      DashboardName: `vault-rollout-${stage}`,
      DashboardBody: dashboardBodySub({ namespace, service: 'vault-rollout', stage }),
    });
    // The alarms on the EMF metrics read the namespace the functions write to, as the dashboard does.
    for (const id of ['RefusedMessagesAlarm', 'HaltedRotationsAlarm']) expect(props(t(), id).Namespace).toBe(namespace);
    // Every ${...} of the body is a resource of this template or a pseudo parameter (cfn-lint checks it too).
    const refs = [
      ...dashboardBodySub({ namespace, service: 'vault-rollout', stage })['Fn::Sub'].matchAll(/\$\{([^}.]+)/g),
    ].map(([, r]) => r ?? '');
    expect(refs.filter((r) => !r.startsWith('AWS::') && t().Resources[r] === undefined)).toEqual([]);
  });

  it("serves the HTTP function through the stage's front end", () => {
    const urls = resourcesOf(t(), 'AWS::Lambda::Url').map(([, r]) => r.Properties?.AuthType);
    const apis = resourcesOf(t(), 'AWS::ApiGatewayV2::Api');
    const routes = resourcesOf(t(), 'AWS::ApiGatewayV2::Route')
      .map(([, r]) => r.Properties?.RouteKey)
      .sort();
    if (expected.frontend === 'http-api') {
      expect(urls).toEqual([]);
      expect(apis).toHaveLength(1);
      expect(routes).toEqual(['GET /healthz', 'POST /v1/vault/audit', 'POST /v1/vault/events']);
    } else {
      expect(urls).toEqual([expected.frontend === 'url-iam' ? 'AWS_IAM' : 'NONE']);
      expect(apis).toEqual([]);
    }
  });

  it('gives each function its own role', () => {
    for (const fn of FUNCTIONS)
      expect(props(t(), `${logicalId(fn)}LambdaFunction`).Role).toEqual({
        'Fn::GetAtt': [`${logicalId(fn)}Role`, 'Arn'],
      });
    expect(
      resourcesOf(t(), 'AWS::IAM::Role')
        .map(([id]) => id)
        .sort(),
    ).toEqual(['HttpRole', 'LogsRole', 'NotifyRole', 'ReconcileRole', 'WorkerRole']);
    expect(props(t(), 'NotifyLambdaFunction').Role).toEqual({ 'Fn::GetAtt': ['NotifyRole', 'Arn'] });
    expect(props(t(), 'ReconcileLambdaFunction').Role).toEqual({ 'Fn::GetAtt': ['ReconcileRole', 'Arn'] });
  });

  it('grants no wildcard resource for eks, sts, ssm, secretsmanager, sqs, sns, kms or logs actions, in any policy', () => {
    const all = statementsOf(t());
    expect(all.length).toBeGreaterThan(0);
    for (const { where, statement } of all) {
      const actions = asArray(statement.Action);
      expect([where, actions.filter((a) => a === '*' || a.endsWith(':*'))]).toEqual([where, []]);
      if (!actions.some((a) => GUARDED.test(a))) continue;
      expect([where, statement.NotResource]).toEqual([where, undefined]);
      const resources = asArray(statement.Resource);
      expect(resources.length).toBeGreaterThan(0);
      for (const r of resources) {
        const text = typeof r === 'string' ? r : JSON.stringify(r);
        expect([where, text]).not.toEqual([where, '*']);
        // Only log group ARNs end in ":*" (their streams); no other resource holds a wildcard.
        if (actions.every((a) => a.startsWith('logs:')))
          expect(text).toMatch(
            /:log-group:\/aws\/lambda\/vault-rollout-[a-z]+-(http|worker|logs|reconcile|notify):\*"?}?$/,
          );
        else expect([where, text]).toEqual([where, expect.not.stringContaining('*')]);
      }
    }
  });

  it('derives cluster access from the routing table, for the worker alone', () => {
    const byAction = (role: string, action: string) =>
      statementsOf(t())
        .filter(({ where, statement }) => where.startsWith(`${role}/`) && asArray(statement.Action).includes(action))
        .flatMap(({ statement }) => asArray(statement.Resource));
    const clusters = [...table.clusters.values()];
    const sub = (s: string) => ({ 'Fn::Sub': s });
    expect(byAction('WorkerRole', 'eks:DescribeCluster')).toEqual(
      clusters
        .flatMap((c) =>
          c.eks && !c.eks.roleArn
            ? [`arn:\${AWS::Partition}:eks:${c.eks.region}:\${AWS::AccountId}:cluster/${c.eks.name}`]
            : [],
        )
        .sort()
        .map(sub),
    );
    expect(byAction('WorkerRole', 'sts:AssumeRole')).toEqual(
      clusters.flatMap((c) => (c.eks?.roleArn ? [c.eks.roleArn] : [])).sort(),
    );
    const ssm = clusters.flatMap((c) => (c.kubeconfig && 'ssm' in c.kubeconfig ? [c.kubeconfig.ssm] : []));
    expect(byAction('WorkerRole', 'ssm:GetParameter')).toEqual(
      ssm
        .map((n) =>
          sub(`arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/${n.replace(/^\//, '')}`),
        )
        .sort(),
    );
    const secrets = clusters.flatMap((c) =>
      c.kubeconfig && 'secretsManager' in c.kubeconfig ? [c.kubeconfig.secretsManager] : [],
    );
    expect(byAction('WorkerRole', 'secretsmanager:GetSecretValue')).toEqual(
      secrets.map((s) =>
        s.startsWith('arn:')
          ? s
          : sub(`arn:\${AWS::Partition}:secretsmanager:\${AWS::Region}:\${AWS::AccountId}:secret:${s}-??????`),
      ),
    );
    expect(byAction('WorkerRole', 'sqs:ReceiveMessage')).toEqual([{ 'Fn::GetAtt': ['RolloutQueue', 'Arn'] }]);
    // Only to its own queue (the follow-ups of rollouts that outlast an invocation, the next wave) and its DLQ (a
    // refused message, with its reason).
    expect(byAction('WorkerRole', 'sqs:SendMessage')).toEqual([
      { 'Fn::GetAtt': ['RolloutQueue', 'Arn'] },
      { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'Arn'] },
    ]);
    // The rotation store: the worker reads and writes released waves and halts, reconcile only reads halts; no Scan, no delete.
    expect(byAction('WorkerRole', 'dynamodb:UpdateItem')).toEqual([{ 'Fn::GetAtt': ['RotationStateTable', 'Arn'] }]);
    expect(byAction('ReconcileRole', 'dynamodb:Query')).toEqual([{ 'Fn::GetAtt': ['RotationStateTable', 'Arn'] }]);
    expect(byAction('ReconcileRole', 'dynamodb:PutItem')).toEqual([]);
    for (const role of ['HttpRole', 'LogsRole']) {
      for (const action of [
        'eks:DescribeCluster',
        'sts:AssumeRole',
        'secretsmanager:GetSecretValue',
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
      ])
        expect([role, action, byAction(role, action)]).toEqual([role, action, []]);
      expect(byAction(role, 'sqs:SendMessage')).toContainEqual({ 'Fn::GetAtt': ['RolloutQueue', 'Arn'] });
      // Key-level restarts: the intake keeps key baselines in the rotation table, and may touch only those items.
      const baselines = statementsOf(t()).filter(
        ({ where, statement }) =>
          where.startsWith(`${role}/`) && asArray(statement.Action).some((a) => a.startsWith('dynamodb:')),
      );
      expect(baselines.map(({ statement }) => statement)).toEqual([
        {
          Sid: 'KeyBaselines',
          Effect: 'Allow',
          Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem', 'dynamodb:Query'],
          Resource: { 'Fn::GetAtt': ['RotationStateTable', 'Arn'] },
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['keys#*'] } },
        },
      ]);
    }
    const webhook = expected.webhook
      ? [`hmac-secret`, `bearer-token`].map((n) =>
          sub(
            `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/vault-rollout/${stage}/webhook/${n}`,
          ),
        )
      : [];
    expect(byAction('HttpRole', 'ssm:GetParameter')).toEqual(
      webhook.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    );
    expect(byAction('LogsRole', 'ssm:GetParameter')).toEqual([]);
    // Reconcile reads the clusters like the worker, sends to the queue, never consumes it.
    expect(byAction('ReconcileRole', 'eks:DescribeCluster')).toEqual(byAction('WorkerRole', 'eks:DescribeCluster'));
    expect(byAction('ReconcileRole', 'sqs:SendMessage')).toEqual([{ 'Fn::GetAtt': ['RolloutQueue', 'Arn'] }]);
    expect(byAction('ReconcileRole', 'sqs:ReceiveMessage')).toEqual([]);
    // Notifications: only the notify function publishes, to exactly the topics the stage's table names, and reads
    // exactly the SSM parameters of the variables its sinks name; of the table it touches the outbox items alone.
    const topics = [
      ...new Set([...table.allSinks.values()].flatMap((s) => (s.type === 'sns' ? [s.topicArn] : []))),
    ].sort();
    expect(
      statementsOf(t())
        .filter(({ statement }) => asArray(statement.Action).includes('sns:Publish'))
        .map(({ where }) => where.split('/')[0]),
    ).toEqual(topics.length > 0 ? ['NotifyRole'] : []);
    expect(byAction('NotifyRole', 'sns:Publish')).toEqual(topics);
    const variables = [...table.allSinks.values()]
      .flatMap((s) =>
        s.type === 'slack' || s.type === 'teams'
          ? [s.urlFromEnv]
          : s.type === 'webhook'
            ? [s.urlFromEnv, s.secretFromEnv].filter((v) => v !== undefined)
            : [],
      )
      .sort();
    expect(byAction('NotifyRole', 'ssm:GetParameter')).toEqual(
      variables.map((v) =>
        sub(
          `arn:\${AWS::Partition}:ssm:\${AWS::Region}:\${AWS::AccountId}:parameter/vault-rollout/${stage}/notify/${v}`,
        ),
      ),
    );
    if (stage === 'staging')
      expect(topics).toEqual(['arn:aws:sns:eu-west-1:123456789012:vault-rollout-staging-notifications']);
    const outbox = statementsOf(t()).filter(
      ({ where, statement }) =>
        where.startsWith('NotifyRole/') && asArray(statement.Action).some((a) => a.startsWith('dynamodb:')),
    );
    expect(outbox.map(({ statement }) => statement)).toEqual([
      {
        Sid: 'ReadStateStream',
        Effect: 'Allow',
        Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams'],
        Resource: { 'Fn::GetAtt': ['RotationStateTable', 'StreamArn'] },
      },
      {
        Sid: 'NotificationOutbox',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        Resource: { 'Fn::GetAtt': ['RotationStateTable', 'Arn'] },
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['notify#*'] } },
      },
    ]);
  });

  it("runs reconcile on the stage's EventBridge schedule, one at a time, logging in to Vault as the stage says", () => {
    const rules = resourcesOf(t(), 'AWS::Events::Rule').map(([, r]) => r.Properties ?? {});
    expect(rules).toEqual([
      {
        ScheduleExpression: stage === 'dev' ? 'rate(1 hour)' : 'rate(15 minutes)',
        State: 'ENABLED',
        Targets: [{ Arn: { 'Fn::GetAtt': ['ReconcileLambdaFunction', 'Arn'] }, Id: 'reconcileSchedule' }],
      },
    ]);
    const fn = props(t(), 'ReconcileLambdaFunction');
    expect(fn).toMatchObject({
      Runtime: 'nodejs24.x',
      Handler: 'functions/reconcile.handler',
      ReservedConcurrentExecutions: 1,
    });
    const env = (fn.Environment as { Variables: Record<string, unknown> }).Variables;
    const vaultLogin =
      stage === 'dev'
        ? {
            VAULT_AUTH_METHOD: 'approle',
            VAULT_ROLE_ID_SSM: '/vault-rollout/dev/vault/role-id',
            VAULT_SECRET_ID_SSM: '/vault-rollout/dev/vault/secret-id',
          }
        : {
            VAULT_AUTH_METHOD: 'aws',
            VAULT_AWS_ROLE: 'vault-rollout-reconcile',
            VAULT_AWS_HEADER_VALUE: `vault.${stage}.example.com`,
          };
    expect(env).toMatchObject({
      VAULT_ADDR: `https://vault.${stage}.example.com:8200`,
      VAULT_ROLLOUT_QUEUE_URL: { Ref: 'RolloutQueue' },
      ...vaultLogin,
    });
    const entries = readZipEntries(readFileSync(join(packages[stage].dir, 'reconcile.zip')))
      .map((e) => e.name)
      .sort();
    expect(entries).toEqual([
      'functions/reconcile.mjs',
      `infra/routes/${stage}.compiled.json`,
      `infra/routes/${stage}.intake.compiled.json`,
    ]);
  });
});
