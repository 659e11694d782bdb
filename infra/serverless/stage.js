// osls variable resolver: the per-stage choices of serverless.yml that are more than a value — how the HTTP
// function is reached (a Function URL or an HTTP API, with app-level HMAC/bearer or AWS_IAM auth) and where the
// alarms go (an SNS topic ARN as is, or an e-mail address subscribed to a topic this stack creates).
// Used as ${file(./infra/serverless/stage.js):<export>}; each export is called with osls's variable resolver.

const HTTP_ROUTES = [
  { method: 'POST', path: '/v1/vault/audit' },
  { method: 'POST', path: '/v1/vault/events' },
  { method: 'GET', path: '/healthz' },
];

async function frontend({ resolveVariable }) {
  const [kind, auth] = await Promise.all([resolveVariable('param:httpFrontend'), resolveVariable('param:httpAuth')]);
  if (kind !== 'function-url' && kind !== 'http-api')
    throw new Error(`param httpFrontend "${kind}": give function-url or http-api`);
  const iam = auth === 'iam';
  if (
    !iam &&
    String(auth)
      .split(',')
      .some((s) => !['hmac', 'bearer'].includes(s.trim()))
  ) {
    throw new Error(`param httpAuth "${auth}": give hmac, bearer, "hmac,bearer" or iam`);
  }
  return { kind, iam };
}

/** functions.http.url: the Function URL, or false when an HTTP API serves the function. */
export async function httpUrl(context) {
  const { kind, iam } = await frontend(context);
  if (kind !== 'function-url') return false;
  return iam ? { authorizer: 'aws_iam' } : true;
}

/** functions.http.events: one httpApi route per endpoint, or none with a Function URL. */
export async function httpEvents(context) {
  const { kind, iam } = await frontend(context);
  if (kind !== 'http-api') return [];
  return HTTP_ROUTES.map((route) => ({ httpApi: iam ? { ...route, authorizer: { type: 'aws_iam' } } : route }));
}

/** The alarm target: an SNS topic ARN, or an e-mail address (then the stack creates the topic). */
async function alarmTarget({ resolveVariable }) {
  const target = String(await resolveVariable('param:alarmTarget'));
  if (/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$/.test(target)) return { topicArn: target };
  if (/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(target)) return { email: target };
  throw new Error(`param alarmTarget "${target}": give an SNS topic ARN or an e-mail address`);
}

/** AlarmActions / OKActions of every alarm. */
export async function alarmActions(context) {
  const target = await alarmTarget(context);
  return target.topicArn !== undefined ? [target.topicArn] : [{ Ref: 'AlarmTopic' }];
}

/** Resources merged into the template: the topic and its e-mail subscription when the target is an address. */
export async function alarmResources(context) {
  const target = await alarmTarget(context);
  if (target.email === undefined) return {};
  return {
    Resources: {
      AlarmTopic: {
        Type: 'AWS::SNS::Topic',
        // Not encrypted with aws/sns: CloudWatch alarms cannot publish to a topic under the AWS managed key.
        Properties: { DisplayName: 'vault-rollout alarms' },
      },
      AlarmEmailSubscription: {
        Type: 'AWS::SNS::Subscription',
        Properties: { TopicArn: { Ref: 'AlarmTopic' }, Protocol: 'email', Endpoint: target.email },
      },
    },
  };
}

const ROLE_ARN = /^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@/-]+$/;

/**
 * The rollout queue's resource policy: only the intake sends (the http and logs functions' roles, the worker's
 * follow-ups of its own messages, plus the
 * principals named in `param:queueSenders` — relay hosts using `--to-sqs`, or an operator who redrives the
 * dead-letter queue), and only the worker receives, deletes or hides messages. IAM allows nothing beyond the
 * roles' own policies anyway; the queue policy also stops any other principal of the account that holds a broad
 * `sqs:*` from feeding or draining the queue. Deny statements name the account, never `*`.
 */
export async function rolloutQueuePolicy({ resolveVariable }) {
  const raw = String((await resolveVariable('param:queueSenders')) ?? '');
  const extra = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = extra.filter((arn) => !ROLE_ARN.test(arn));
  if (bad.length > 0)
    throw new Error(
      `param queueSenders: ${bad.map((b) => JSON.stringify(b)).join(', ')} is not an IAM role ARN (no wildcards)`,
    );
  const account = { 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:root' };
  const queue = { 'Fn::GetAtt': ['RolloutQueue', 'Arn'] };
  const role = (id) => ({ 'Fn::GetAtt': [id, 'Arn'] });
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'OnlyTheIntakeSends',
        Effect: 'Deny',
        Principal: { AWS: account },
        Action: 'sqs:SendMessage',
        Resource: queue,
        // The worker sends follow-ups: the same changes, when rollouts outlast its time budget; reconcile sends what
        // Vault's metadata shows is behind.
        Condition: {
          ArnNotEquals: {
            'aws:PrincipalArn': [
              role('HttpRole'),
              role('LogsRole'),
              role('WorkerRole'),
              role('ReconcileRole'),
              ...extra,
            ],
          },
        },
      },
      {
        Sid: 'OnlyTheWorkerConsumes',
        Effect: 'Deny',
        Principal: { AWS: account },
        Action: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'],
        Resource: queue,
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': [role('WorkerRole')] } },
      },
    ],
  };
}

/**
 * The dead-letter queue's resource policy: only the worker sends to it (refused messages, with their reason); SQS
 * itself moves what the rollout queue gives up on (the redrive is not a principal's SendMessage, so the deny does not
 * stop it). Another principal of the account with a broad `sqs:*` cannot plant messages there for an operator to
 * redrive into the rollout queue. Consuming is left to IAM: operators read and redrive the dead letters.
 */
export function deadLetterQueuePolicy() {
  const account = { 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:root' };
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'OnlyTheWorkerSends',
        Effect: 'Deny',
        Principal: { AWS: account },
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'Arn'] },
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': [{ 'Fn::GetAtt': ['WorkerRole', 'Arn'] }] } },
      },
    ],
  };
}
