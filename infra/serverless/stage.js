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
  if (kind !== 'function-url' && kind !== 'http-api') throw new Error(`param httpFrontend "${kind}": give function-url or http-api`);
  const iam = auth === 'iam';
  if (!iam && String(auth).split(',').some((s) => !['hmac', 'bearer'].includes(s.trim()))) {
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
