import { describe, expect, it } from 'vitest';
import {
  CLOUDFORMATION_PLACEHOLDERS,
  clusterAccessStatements,
  iamFromRoutes,
  QUEUE_CONSUMER_ACTIONS,
  type ArnPlaceholders,
  type CfnString,
  type IamInputs,
  type IamStatement,
} from '../../../lib/deploy/iam-from-routes.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile } from '../../helpers.ts';

const LITERAL: ArnPlaceholders = { partition: 'aws', region: 'eu-west-1', accountId: '123456789012' };

const inputs = (overrides: Partial<IamInputs> = {}): IamInputs => ({
  queueArn: { 'Fn::GetAtt': ['RolloutQueue', 'Arn'] },
  logGroups: {
    http: '/aws/lambda/vr-test-http',
    worker: '/aws/lambda/vr-test-worker',
    logs: '/aws/lambda/vr-test-logs',
    reconcile: '/aws/lambda/vr-test-reconcile',
    notify: '/aws/lambda/vr-test-notify',
  },
  webhookParameters: ['/vr/test/hmac', '/vr/test/token'],
  placeholders: LITERAL,
  ...overrides,
});

const table = (clusters: string) => loadRoutingTable(`clusters:\n${clusters}\nroutes: []\n`, 'routes.yaml');

const bySid = (statements: readonly IamStatement[]) => Object.fromEntries(statements.map((s) => [s.Sid, s]));

describe('IAM from the routing table: cluster access', () => {
  it.each<[string, string, Record<string, { Action: string[]; Resource: CfnString[] }>]>([
    [
      'an EKS cluster in this account: DescribeCluster on its ARN in its region',
      '  a: { eks: { name: prod-a, region: us-east-1 } }',
      {
        DescribeEksClusters: {
          Action: ['eks:DescribeCluster'],
          Resource: ['arn:aws:eks:us-east-1:123456789012:cluster/prod-a'],
        },
      },
    ],
    [
      'an EKS cluster behind a role: AssumeRole on the role only (the role describes its cluster)',
      '  b: { eks: { name: pay, region: us-east-1, roleArn: "arn:aws:iam::210987654321:role/restarter" } }',
      { AssumeClusterRoles: { Action: ['sts:AssumeRole'], Resource: ['arn:aws:iam::210987654321:role/restarter'] } },
    ],
    [
      'a kubeconfig in SSM: GetParameter on the parameter, leading slash folded into the ARN',
      '  c: { kubeconfig: { ssm: /vr/kubeconfigs/c } }',
      {
        ReadKubeconfigParameters: {
          Action: ['ssm:GetParameter'],
          Resource: ['arn:aws:ssm:eu-west-1:123456789012:parameter/vr/kubeconfigs/c'],
        },
      },
    ],
    [
      'a kubeconfig in SSM named without a slash',
      '  c: { kubeconfig: { ssm: kubeconfig-c } }',
      {
        ReadKubeconfigParameters: {
          Action: ['ssm:GetParameter'],
          Resource: ['arn:aws:ssm:eu-west-1:123456789012:parameter/kubeconfig-c'],
        },
      },
    ],
    [
      'a kubeconfig in SSM given by ARN (a shared parameter): the ARN as is',
      '  c: { kubeconfig: { ssm: "arn:aws:ssm:us-east-1:111122223333:parameter/shared/kc" } }',
      {
        ReadKubeconfigParameters: {
          Action: ['ssm:GetParameter'],
          Resource: ['arn:aws:ssm:us-east-1:111122223333:parameter/shared/kc'],
        },
      },
    ],
    [
      'a kubeconfig secret by name: the name with the six random characters Secrets Manager appends',
      '  d: { kubeconfig: { secretsManager: vr/kubeconfigs/d } }',
      {
        ReadKubeconfigSecrets: {
          Action: ['secretsmanager:GetSecretValue'],
          Resource: ['arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/kubeconfigs/d-??????'],
        },
      },
    ],
    [
      'a kubeconfig secret by full ARN: the ARN as is',
      '  d: { kubeconfig: { secretsManager: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/d-Ab12Cd" } }',
      {
        ReadKubeconfigSecrets: {
          Action: ['secretsmanager:GetSecretValue'],
          Resource: ['arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/d-Ab12Cd'],
        },
      },
    ],
    ['a kubeconfig file: nothing', '  e: { kubeconfig: { file: e.yaml } }', {}],
    ['a kubeconfig from the environment: nothing', '  e: { kubeconfig: { env: KUBECONFIG_E } }', {}],
    ['an inline kubeconfig: nothing', '  e: { kubeconfig: { inline: "apiVersion: v1" } }', {}],
  ])('%s', (_name, clusters, expected) => {
    const { statements } = clusterAccessStatements(table(clusters), LITERAL);
    expect(Object.fromEntries(statements.map((s) => [s.Sid, { Action: s.Action, Resource: s.Resource }]))).toEqual(
      expected,
    );
    for (const s of statements) expect(s.Effect).toBe('Allow');
  });

  it('with the CloudFormation placeholders, account-specific ARNs become Fn::Sub and given ARNs stay literal', () => {
    const { statements } = clusterAccessStatements(
      table(
        [
          '  a: { eks: { name: prod-a, region: us-east-1 } }',
          '  c: { kubeconfig: { ssm: /vr/c } }',
          '  d: { kubeconfig: { secretsManager: vr/d } }',
          '  f: { kubeconfig: { secretsManager: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/f-Ab12Cd" } }',
        ].join('\n'),
      ),
      CLOUDFORMATION_PLACEHOLDERS,
    );
    const s = bySid(statements);
    expect(s.DescribeEksClusters?.Resource).toEqual([
      { 'Fn::Sub': 'arn:${AWS::Partition}:eks:us-east-1:${AWS::AccountId}:cluster/prod-a' },
    ]);
    expect(s.ReadKubeconfigParameters?.Resource).toEqual([
      { 'Fn::Sub': 'arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/vr/c' },
    ]);
    expect(s.ReadKubeconfigSecrets?.Resource).toEqual([
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/f-Ab12Cd',
      { 'Fn::Sub': 'arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:vr/d-??????' },
    ]);
  });

  it('merges, deduplicates and sorts resources across clusters; one statement per kind of access', () => {
    const { statements, assumedRoles } = clusterAccessStatements(
      table(
        [
          '  z: { eks: { name: zed, region: eu-west-1 } }',
          '  a: { eks: { name: alpha, region: us-east-1 } }',
          '  a2: { eks: { name: alpha, region: us-east-1 } }',
          '  p1: { eks: { name: pay-1, region: us-east-1, roleArn: "arn:aws:iam::210987654321:role/r" } }',
          '  p2: { eks: { name: pay-2, region: us-west-2, roleArn: "arn:aws:iam::210987654321:role/r" } }',
          '  g: { eks: { name: gov, region: us-gov-west-1, roleArn: "arn:aws-us-gov:iam::333344445555:role/g" } }',
        ].join('\n'),
      ),
      LITERAL,
    );
    expect(statements.map((s) => s.Sid)).toEqual(['DescribeEksClusters', 'AssumeClusterRoles']);
    expect(bySid(statements).DescribeEksClusters?.Resource).toEqual([
      'arn:aws:eks:eu-west-1:123456789012:cluster/zed',
      'arn:aws:eks:us-east-1:123456789012:cluster/alpha',
    ]);
    expect(bySid(statements).AssumeClusterRoles?.Resource).toEqual([
      'arn:aws-us-gov:iam::333344445555:role/g',
      'arn:aws:iam::210987654321:role/r',
    ]);
    expect(assumedRoles).toEqual([
      {
        roleArn: 'arn:aws-us-gov:iam::333344445555:role/g',
        clusters: ['g'],
        statement: {
          Sid: 'DescribeEksClusters',
          Effect: 'Allow',
          Action: ['eks:DescribeCluster'],
          Resource: ['arn:aws-us-gov:eks:us-gov-west-1:333344445555:cluster/gov'],
        },
      },
      {
        roleArn: 'arn:aws:iam::210987654321:role/r',
        clusters: ['p1', 'p2'],
        statement: {
          Sid: 'DescribeEksClusters',
          Effect: 'Allow',
          Action: ['eks:DescribeCluster'],
          Resource: [
            'arn:aws:eks:us-east-1:210987654321:cluster/pay-1',
            'arn:aws:eks:us-west-2:210987654321:cluster/pay-2',
          ],
        },
      },
    ]);
  });

  it('no clusters that need AWS: no statements at all (never an empty Resource or a wildcard)', () => {
    expect(clusterAccessStatements(table('  e: { kubeconfig: { file: e.yaml } }'), LITERAL)).toEqual({
      statements: [],
      assumedRoles: [],
    });
  });
});

describe('IAM from the routing table: one role per function', () => {
  const prod = loadRoutingTable(readRepoFile('infra/routes/prod.yaml'), 'prod.yaml');

  it.each<[string, Partial<IamInputs>, Record<'http' | 'worker' | 'logs', string[]>]>([
    [
      'webhook secrets for hmac and bearer; the worker alone reaches clusters and consumes the queue',
      {},
      {
        http: ['WriteOwnLogs', 'SendToRolloutQueue', 'ReadWebhookSecrets'],
        worker: [
          'WriteOwnLogs',
          'ConsumeRolloutQueue',
          'SendFollowUps',
          'DescribeEksClusters',
          'AssumeClusterRoles',
          'ReadKubeconfigSecrets',
        ],
        logs: ['WriteOwnLogs', 'SendToRolloutQueue'],
      },
    ],
    [
      'IAM auth: no webhook secrets',
      { webhookParameters: [] },
      {
        http: ['WriteOwnLogs', 'SendToRolloutQueue'],
        worker: [
          'WriteOwnLogs',
          'ConsumeRolloutQueue',
          'SendFollowUps',
          'DescribeEksClusters',
          'AssumeClusterRoles',
          'ReadKubeconfigSecrets',
        ],
        logs: ['WriteOwnLogs', 'SendToRolloutQueue'],
      },
    ],
    [
      'an on-failure queue for the logs function',
      { logsFailureQueueArn: { 'Fn::GetAtt': ['LogsFailureQueue', 'Arn'] } },
      {
        http: ['WriteOwnLogs', 'SendToRolloutQueue', 'ReadWebhookSecrets'],
        worker: [
          'WriteOwnLogs',
          'ConsumeRolloutQueue',
          'SendFollowUps',
          'DescribeEksClusters',
          'AssumeClusterRoles',
          'ReadKubeconfigSecrets',
        ],
        logs: ['WriteOwnLogs', 'SendToRolloutQueue', 'SendToFailureQueue'],
      },
    ],
  ])('%s', (_name, overrides, expected) => {
    const policies = iamFromRoutes(prod, inputs(overrides));
    expect({
      http: policies.http.map((s) => s.Sid),
      worker: policies.worker.map((s) => s.Sid),
      logs: policies.logs.map((s) => s.Sid),
    }).toEqual(expected);
  });

  it('gives each function exactly its own log group, the queue actions of its side, and the webhook parameters to http', () => {
    const p = iamFromRoutes(prod, inputs());
    expect(bySid(p.http).WriteOwnLogs).toEqual({
      Sid: 'WriteOwnLogs',
      Effect: 'Allow',
      Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      Resource: ['arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/vr-test-http:*'],
    });
    expect(bySid(p.worker).WriteOwnLogs?.Resource).toEqual([
      'arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/vr-test-worker:*',
    ]);
    expect(bySid(p.http).SendToRolloutQueue).toEqual({
      Sid: 'SendToRolloutQueue',
      Effect: 'Allow',
      Action: ['sqs:SendMessage'],
      Resource: [{ 'Fn::GetAtt': ['RolloutQueue', 'Arn'] }],
    });
    expect(bySid(p.worker).ConsumeRolloutQueue?.Action).toEqual([...QUEUE_CONSUMER_ACTIONS].sort());
    expect(bySid(p.http).ReadWebhookSecrets?.Resource).toEqual([
      'arn:aws:ssm:eu-west-1:123456789012:parameter/vr/test/hmac',
      'arn:aws:ssm:eu-west-1:123456789012:parameter/vr/test/token',
    ]);
  });

  it('derives the prod table: three EKS clusters here, one role across accounts, one secret by ARN', () => {
    const p = iamFromRoutes(prod, inputs());
    const worker = bySid(p.worker);
    expect(worker.DescribeEksClusters?.Resource).toEqual([
      'arn:aws:eks:eu-west-1:123456789012:cluster/prod-eu-1',
      'arn:aws:eks:eu-west-1:123456789012:cluster/prod-eu-2',
      'arn:aws:eks:us-east-1:123456789012:cluster/prod-us-1',
    ]);
    expect(worker.AssumeClusterRoles?.Resource).toEqual(['arn:aws:iam::210987654321:role/vault-rollout-restarter']);
    expect(worker.ReadKubeconfigSecrets?.Resource).toEqual([
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:vault-rollout/prod/kubeconfigs/onprem-dc1-Ab12Cd',
    ]);
    expect(p.assumedRoles.map((r) => [r.roleArn, r.clusters])).toEqual([
      ['arn:aws:iam::210987654321:role/vault-rollout-restarter', ['prod-payments-us']],
    ]);
  });

  it('reconcile: its own logs, sending to the queue, the clusters like the worker, and only its own Vault login credentials', () => {
    const p = iamFromRoutes(
      prod,
      inputs({ vaultCredentials: { ssmParameters: ['/vr/prod/vault/role-id'], secrets: ['vr/prod/vault/secret-id'] } }),
    );
    expect(p.reconcile.map((s) => s.Sid)).toEqual([
      'WriteOwnLogs',
      'SendToRolloutQueue',
      'DescribeEksClusters',
      'AssumeClusterRoles',
      'ReadKubeconfigSecrets',
      'ReadVaultLogin',
      'ReadVaultSecretId',
    ]);
    expect(bySid(p.reconcile).ReadVaultLogin?.Resource).toEqual([
      'arn:aws:ssm:eu-west-1:123456789012:parameter/vr/prod/vault/role-id',
    ]);
    expect(bySid(p.reconcile).ReadVaultSecretId?.Resource).toEqual([
      'arn:aws:secretsmanager:eu-west-1:123456789012:secret:vr/prod/vault/secret-id-??????',
    ]);
    expect(bySid(p.reconcile).DescribeEksClusters).toEqual(bySid(p.worker).DescribeEksClusters);
    // AWS IAM login: nothing to read, no statement (never a wildcard).
    expect(iamFromRoutes(prod, inputs()).reconcile.map((s) => s.Sid)).not.toContain('ReadVaultLogin');
  });

  it('notify: its own logs, sns:Publish on exactly the topics the sinks name, the SSM parameters of exactly the variables they name', () => {
    const sinks = loadRoutingTable(
      [
        'clusters:\n  a: { kubeconfig: { env: KC } }',
        'notifications:',
        '  sinks:',
        '    ops: { type: slack, urlFromEnv: SLACK_URL }',
        '    audit: { type: webhook, url: "https://audit.example.com/in", secretFromEnv: AUDIT_KEY }',
        '    pager: { type: sns, topicArn: "arn:aws:sns:eu-west-1:123456789012:pager" }',
        'routes:',
        '  - name: app',
        '    match: { path: "secret/app/*" }',
        '    targets: [{ clusters: [a], namespace: app, kind: Deployment, name: api }]',
        '    notifications:',
        '      sinks:',
        '        team: { type: teams, urlFromEnv: TEAMS_URL }',
        '        fifo: { type: sns, topicArn: "arn:aws:sns:us-east-1:123456789012:app.fifo" }',
        '',
      ].join('\n'),
      'routes.yaml',
    );
    const p = iamFromRoutes(sinks, inputs({ notifySecretPrefix: '/vr/test/notify' }));
    expect(p.notify).toEqual([
      {
        Sid: 'WriteOwnLogs',
        Effect: 'Allow',
        Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        Resource: ['arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/vr-test-notify:*'],
      },
      {
        Sid: 'PublishNotifications',
        Effect: 'Allow',
        Action: ['sns:Publish'],
        Resource: ['arn:aws:sns:eu-west-1:123456789012:pager', 'arn:aws:sns:us-east-1:123456789012:app.fifo'],
      },
      {
        Sid: 'ReadNotificationSecrets',
        Effect: 'Allow',
        Action: ['ssm:GetParameter'],
        Resource: ['AUDIT_KEY', 'SLACK_URL', 'TEAMS_URL'].map(
          (v) => `arn:aws:ssm:eu-west-1:123456789012:parameter/vr/test/notify/${v}`,
        ),
      },
    ]);
    // No other function publishes; a table without sinks gives notify its logs only (never a wildcard).
    expect([...p.http, ...p.worker, ...p.logs, ...p.reconcile].flatMap((s) => s.Action)).not.toContain('sns:Publish');
    expect(iamFromRoutes(prod, inputs({ notifySecretPrefix: '/vr/test/notify' })).notify.map((s) => s.Sid)).toEqual([
      'WriteOwnLogs',
    ]);
  });

  it('never grants a wildcard resource, for any stage table', () => {
    for (const stage of ['dev', 'staging', 'prod']) {
      const p = iamFromRoutes(
        loadRoutingTable(readRepoFile(`infra/routes/${stage}.yaml`), `${stage}.yaml`),
        inputs({ placeholders: undefined }),
      );
      for (const s of [...p.http, ...p.worker, ...p.logs, ...p.reconcile, ...p.notify]) {
        expect(s.Resource.length).toBeGreaterThan(0);
        for (const r of s.Resource) {
          expect(r).not.toBe('*');
          // Only a log group's ARN ends in ":*" (its log streams); nothing else has a wildcard at all.
          if (s.Sid !== 'WriteOwnLogs') expect(JSON.stringify(r)).not.toContain('*');
        }
      }
    }
  });
});
