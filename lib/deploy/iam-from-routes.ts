/**
 * Least-privilege IAM for the three Lambda functions, derived from a stage's routing table: the worker may reach
 * exactly the clusters the table names (their EKS clusters, the roles to assume, the kubeconfig parameters and
 * secrets) and consume the queue; the HTTP and CloudWatch Logs functions may only send to the queue (and the HTTP
 * function read its webhook secrets). Every function writes only to its own log group. No statement uses
 * `Resource: "*"`.
 *
 * Pure: the routing table and the deployment's names come in, IAM statements go out. ARNs that depend on the
 * deploying account are built from placeholders: pass the CloudFormation pseudo parameters (`${AWS::Partition}`, …,
 * the default) and they come out as `Fn::Sub`; pass literal values and they come out as plain strings.
 *
 * Where the credentials are used, and so what is granted (lib/kube/credentials):
 * - `eks` without `roleArn`: the function's own credentials call DescribeCluster in the cluster's region, in this
 *   account: `eks:DescribeCluster` on `arn:<partition>:eks:<region>:<account>:cluster/<name>`. The bearer token is
 *   a presigned sts:GetCallerIdentity, which needs no permission.
 * - `eks` with `roleArn`: the function only calls `sts:AssumeRole` on that role; the assumed credentials call
 *   DescribeCluster, so the *assumed role* needs `eks:DescribeCluster` on its cluster (reported in
 *   `assumedRoles`, for whoever manages that role), not the function's role.
 * - `kubeconfig: { ssm }`: `ssm:GetParameter` on the parameter, in the function's region (an ARN is used as given).
 * - `kubeconfig: { secretsManager }`: `secretsmanager:GetSecretValue` on the secret: a full ARN as given, a name as
 *   `arn:…:secret:<name>-??????` (Secrets Manager appends six random characters to every secret's ARN).
 * - `kubeconfig: { file | env | inline }`: nothing.
 * The notify function (notifications) may publish to exactly the SNS topics the table's sinks name
 * (`sns:Publish`) and read exactly the SSM parameters that hold the variables its sinks name (`<prefix>/<VARIABLE>`);
 * a topic encrypted with a customer managed key also needs kms:GenerateDataKey and kms:Decrypt, not granted here.
 * SecureString parameters and secrets encrypted with the AWS managed keys (aws/ssm, aws/secretsmanager) need no
 * kms permission; a customer managed key needs kms:Decrypt, which this module does not grant.
 */
import { sinkParameterName, sinkTopics, sinkVariables } from '../notify/sinks.ts';
import type { RoutingTable } from '../routing/routing-table.ts';

/** A CloudFormation string: a literal or an intrinsic function. */
export type CfnString =
  string | { 'Fn::Sub': string } | { 'Fn::GetAtt': [string, string] } | { Ref: string } | { 'Fn::ImportValue': string };

export interface IamStatement {
  Sid: string;
  Effect: 'Allow';
  Action: string[];
  Resource: CfnString[];
}

export const FUNCTION_NAMES = ['http', 'worker', 'logs', 'reconcile', 'notify'] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

export interface ArnPlaceholders {
  /** e.g. `${AWS::Partition}` or `aws` */
  partition: string;
  /** e.g. `${AWS::Region}` or `eu-west-1`: where the functions run (SSM parameters and secrets by name live there). */
  region: string;
  /** e.g. `${AWS::AccountId}` or `123456789012` */
  accountId: string;
}

export const CLOUDFORMATION_PLACEHOLDERS: ArnPlaceholders = {
  partition: '${AWS::Partition}',
  region: '${AWS::Region}',
  accountId: '${AWS::AccountId}',
};

export interface IamInputs {
  /** The FIFO rollout queue's ARN, e.g. `{ 'Fn::GetAtt': ['RolloutQueue', 'Arn'] }`. */
  queueArn: CfnString;
  /** Each function's own log group name, e.g. `/aws/lambda/vault-rollout-prod-worker`. */
  logGroups: Readonly<Record<FunctionName, string>>;
  /**
   * SSM parameter names (or ARNs) of the webhook HMAC secret and bearer token the HTTP function reads; none for IAM
   * auth.
   */
  webhookParameters: readonly string[];
  /**
   * The Logs function's on-failure destination (an SQS queue's ARN): CloudWatch Logs invokes it asynchronously and
   * Lambda sends events that still fail after its retries there, with the function's role.
   */
  logsFailureQueueArn?: CfnString;
  /**
   * What the reconcile function reads to log in to Vault: SSM SecureString names (a token, an AppRole role and secret
   * ID) and Secrets Manager secret ids; none for an AWS IAM login, which signs with the function's own role.
   */
  vaultCredentials?: { ssmParameters: readonly string[]; secrets: readonly string[] };
  /**
   * Where the notify function reads its sinks' secrets: the SSM parameter `<prefix>/<VARIABLE>` per variable a sink
   * names.
   */
  notifySecretPrefix?: string;
  placeholders?: ArnPlaceholders;
}

/** What a role assumed for a cross-account cluster must allow itself; not part of this stack. */
export interface AssumedRoleNeeds {
  roleArn: string;
  /** Routing-table cluster names reached through this role. */
  clusters: string[];
  statement: IamStatement;
}

export interface FunctionPolicies {
  http: IamStatement[];
  worker: IamStatement[];
  logs: IamStatement[];
  reconcile: IamStatement[];
  notify: IamStatement[];
  assumedRoles: AssumedRoleNeeds[];
}

/** The queue actions each side needs: the SQS event source mapping polls with the worker's role. */
export const QUEUE_CONSUMER_ACTIONS = [
  'sqs:ChangeMessageVisibility',
  'sqs:DeleteMessage',
  'sqs:GetQueueAttributes',
  'sqs:ReceiveMessage',
];
export const QUEUE_PRODUCER_ACTIONS = ['sqs:SendMessage'];
export const LOG_ACTIONS = ['logs:CreateLogStream', 'logs:PutLogEvents'];

/** A string with placeholders becomes `Fn::Sub`; a literal stays a string. */
function arn(text: string): CfnString {
  return /\$\{[^}]+\}/.test(text) ? { 'Fn::Sub': text } : text;
}

/** Names may not contain `${`, but keep Fn::Sub from reading one as a variable if they ever do. */
const literal = (text: string): string => text.replaceAll('${', '${!');

const isArn = (text: string): boolean => text.startsWith('arn:');

export function eksClusterArn(name: string, region: string, p: ArnPlaceholders): CfnString {
  return arn(`arn:${p.partition}:eks:${literal(region)}:${p.accountId}:cluster/${literal(name)}`);
}

export function ssmParameterArn(name: string, p: ArnPlaceholders): CfnString {
  if (isArn(name)) return name;
  return arn(`arn:${p.partition}:ssm:${p.region}:${p.accountId}:parameter/${literal(name.replace(/^\/+/, ''))}`);
}

export function secretArn(idOrArn: string, p: ArnPlaceholders): CfnString {
  if (isArn(idOrArn)) return idOrArn;
  return arn(`arn:${p.partition}:secretsmanager:${p.region}:${p.accountId}:secret:${literal(idOrArn)}-??????`);
}

export function logGroupArn(logGroup: string, p: ArnPlaceholders): CfnString {
  return arn(`arn:${p.partition}:logs:${p.region}:${p.accountId}:log-group:${literal(logGroup)}:*`);
}

/** The partition, region and account of an IAM role ARN, for the cluster it reaches. */
function roleAccount(roleArn: string): { partition: string; accountId: string } {
  const [, partition = 'aws', , , accountId = ''] = roleArn.split(':');
  return { partition, accountId };
}

const key = (v: CfnString): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** Unique resources in a stable order. */
function unique(values: readonly CfnString[]): CfnString[] {
  const byKey = new Map(values.map((v) => [key(v), v] as const));
  return [...byKey.keys()].sort().map((k) => byKey.get(k) as CfnString);
}

function statement(Sid: string, Action: readonly string[], Resource: readonly CfnString[]): IamStatement[] {
  // An IAM statement must name at least one resource: no resources, no statement (never a wildcard).
  return Resource.length === 0
    ? []
    : [{ Sid, Effect: 'Allow', Action: [...Action].sort(), Resource: unique(Resource) }];
}

/** The cluster-access statements the routing table implies, for the function that restarts workloads. */
export function clusterAccessStatements(
  table: Pick<RoutingTable, 'clusters'>,
  p: ArnPlaceholders = CLOUDFORMATION_PLACEHOLDERS,
): { statements: IamStatement[]; assumedRoles: AssumedRoleNeeds[] } {
  const eksArns: CfnString[] = [];
  const roleArns: string[] = [];
  const parameterArns: CfnString[] = [];
  const secretArns: CfnString[] = [];
  const assumed = new Map<string, { clusters: string[]; arns: string[] }>();

  for (const [name, cluster] of [...table.clusters].sort(([a], [b]) => a.localeCompare(b))) {
    if (cluster.eks !== undefined) {
      const { roleArn, region } = cluster.eks;
      if (roleArn === undefined) {
        eksArns.push(eksClusterArn(cluster.eks.name, region, p));
      } else {
        roleArns.push(roleArn);
        const { partition, accountId } = roleAccount(roleArn);
        const entry = assumed.get(roleArn) ?? { clusters: [], arns: [] };
        entry.clusters.push(name);
        entry.arns.push(`arn:${partition}:eks:${region}:${accountId}:cluster/${cluster.eks.name}`);
        assumed.set(roleArn, entry);
      }
    }
    const source = cluster.kubeconfig;
    if (source === undefined) continue;
    if ('ssm' in source) parameterArns.push(ssmParameterArn(source.ssm, p));
    else if ('secretsManager' in source) secretArns.push(secretArn(source.secretsManager, p));
    // file, env and inline kubeconfigs need no AWS permission.
  }

  return {
    statements: [
      ...statement('DescribeEksClusters', ['eks:DescribeCluster'], eksArns),
      ...statement('AssumeClusterRoles', ['sts:AssumeRole'], roleArns),
      ...statement('ReadKubeconfigParameters', ['ssm:GetParameter'], parameterArns),
      ...statement('ReadKubeconfigSecrets', ['secretsmanager:GetSecretValue'], secretArns),
    ],
    assumedRoles: [...assumed]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([roleArn, { clusters, arns }]) => ({
        roleArn,
        clusters,
        statement: {
          Sid: 'DescribeEksClusters',
          Effect: 'Allow',
          Action: ['eks:DescribeCluster'],
          Resource: unique(arns),
        },
      })),
  };
}

/** The Vault login credentials reconcile reads: SSM parameters and Secrets Manager secrets, nothing else. */
function vaultLoginStatements(inputs: IamInputs, p: ArnPlaceholders): IamStatement[] {
  return [
    ...statement(
      'ReadVaultLogin',
      ['ssm:GetParameter'],
      (inputs.vaultCredentials?.ssmParameters ?? []).map((n) => ssmParameterArn(n, p)),
    ),
    ...statement(
      'ReadVaultSecretId',
      ['secretsmanager:GetSecretValue'],
      (inputs.vaultCredentials?.secrets ?? []).map((n) => secretArn(n, p)),
    ),
  ];
}

/** What the notify function needs: the table's SNS topics, and its sinks' secrets under the stage's prefix. */
function notificationStatements(
  table: Pick<RoutingTable, 'allSinks'>,
  inputs: IamInputs,
  p: ArnPlaceholders,
): IamStatement[] {
  return [
    ...statement('PublishNotifications', ['sns:Publish'], sinkTopics(table.allSinks)),
    ...statement(
      'ReadNotificationSecrets',
      ['ssm:GetParameter'],
      inputs.notifySecretPrefix === undefined
        ? []
        : sinkVariables(table.allSinks).map((v) =>
            ssmParameterArn(sinkParameterName(inputs.notifySecretPrefix as string, v), p),
          ),
    ),
  ];
}

/** The IAM statements of each function's own role. */
export function iamFromRoutes(table: Pick<RoutingTable, 'clusters' | 'allSinks'>, inputs: IamInputs): FunctionPolicies {
  const p = inputs.placeholders ?? CLOUDFORMATION_PLACEHOLDERS;
  const logs = (fn: FunctionName): IamStatement[] =>
    statement('WriteOwnLogs', LOG_ACTIONS, [logGroupArn(inputs.logGroups[fn], p)]);
  const send = statement('SendToRolloutQueue', QUEUE_PRODUCER_ACTIONS, [inputs.queueArn]);
  const access = clusterAccessStatements(table, p);
  return {
    http: [
      ...logs('http'),
      ...send,
      ...statement(
        'ReadWebhookSecrets',
        ['ssm:GetParameter'],
        inputs.webhookParameters.map((n) => ssmParameterArn(n, p)),
      ),
    ],
    // The worker also sends: a follow-up of rollouts still progressing when its time budget ends (the same changes).
    worker: [
      ...logs('worker'),
      ...statement('ConsumeRolloutQueue', QUEUE_CONSUMER_ACTIONS, [inputs.queueArn]),
      ...statement('SendFollowUps', QUEUE_PRODUCER_ACTIONS, [inputs.queueArn]),
      ...access.statements,
    ],
    logs: [
      ...logs('logs'),
      ...send,
      ...statement(
        'SendToFailureQueue',
        QUEUE_PRODUCER_ACTIONS,
        inputs.logsFailureQueueArn === undefined ? [] : [inputs.logsFailureQueueArn],
      ),
    ],
    // Reconcile reads the clusters like the worker (and records versions their pods already run), queues what is
    // behind, and reads only its own Vault login credentials.
    reconcile: [...logs('reconcile'), ...send, ...access.statements, ...vaultLoginStatements(inputs, p)],
    // The notify function sends what the worker put in the outbox: to the table's SNS topics, with its sinks' secrets.
    notify: [...logs('notify'), ...notificationStatements(table, inputs, p)],
    assumedRoles: access.assumedRoles,
  };
}
