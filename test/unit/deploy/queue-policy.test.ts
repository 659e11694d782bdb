/** The queues' resource policies (infra/serverless/stage.js): who may send, who may consume. */
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain ES module for osls's variable resolver, without type declarations
import { deadLetterQueuePolicy, rolloutQueuePolicy } from '../../../infra/serverless/stage.js';

type Policy = {
  Statement: Array<{ Sid: string; Effect: string; Condition: { ArnNotEquals: { 'aws:PrincipalArn': unknown[] } } }>;
};
const resolver = (queueSenders: string) => ({
  resolveVariable: async (name: string) => (name === 'param:queueSenders' ? queueSenders : undefined),
});

describe('rolloutQueuePolicy', () => {
  it('denies sending to all but the intake roles and the named senders, and consuming to all but the worker', async () => {
    const policy = (await rolloutQueuePolicy(
      resolver('arn:aws:iam::123456789012:role/relay-eu, arn:aws:iam::123456789012:role/ops'),
    )) as Policy;
    expect(policy.Statement.map((s) => [s.Sid, s.Effect, s.Condition.ArnNotEquals['aws:PrincipalArn']])).toEqual([
      [
        'OnlyTheIntakeSends',
        'Deny',
        [
          { 'Fn::GetAtt': ['HttpRole', 'Arn'] },
          { 'Fn::GetAtt': ['LogsRole', 'Arn'] },
          { 'Fn::GetAtt': ['WorkerRole', 'Arn'] },
          { 'Fn::GetAtt': ['ReconcileRole', 'Arn'] },
          'arn:aws:iam::123456789012:role/relay-eu',
          'arn:aws:iam::123456789012:role/ops',
        ],
      ],
      ['OnlyTheWorkerConsumes', 'Deny', [{ 'Fn::GetAtt': ['WorkerRole', 'Arn'] }]],
    ]);
  });

  it.each([
    ['a wildcard', 'arn:aws:iam::123456789012:role/*'],
    ['a user, not a role', 'arn:aws:iam::123456789012:user/bob'],
    ['a bare account', '123456789012'],
  ])('refuses %s as a sender', async (_name, arn) => {
    await expect(rolloutQueuePolicy(resolver(arn))).rejects.toThrow(
      /queueSenders: .* is not an IAM role ARN \(no wildcards\)/,
    );
  });
});

describe('deadLetterQueuePolicy', () => {
  it('denies sending dead letters to every principal of the account but the worker, naming no wildcard', () => {
    const policy = deadLetterQueuePolicy() as Policy & {
      Statement: Array<{ Principal: unknown; Action: unknown; Resource: unknown }>;
    };
    expect(policy.Statement).toEqual([
      {
        Sid: 'OnlyTheWorkerSends',
        Effect: 'Deny',
        Principal: { AWS: { 'Fn::Sub': 'arn:${AWS::Partition}:iam::${AWS::AccountId}:root' } },
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': ['RolloutDeadLetterQueue', 'Arn'] },
        Condition: { ArnNotEquals: { 'aws:PrincipalArn': [{ 'Fn::GetAtt': ['WorkerRole', 'Arn'] }] } },
      },
    ]);
    expect(JSON.stringify(policy)).not.toContain('"*"');
  });
});
