/**
 * Lambda: a CloudWatch Logs subscription (Vault's file audit log shipped by the CloudWatch agent) into the same
 * intake. If the queue cannot take the work the invocation fails, so Lambda retries it and then hands it to the
 * function's on-failure destination: nothing is dropped silently.
 */
import type { CloudWatchLogsEvent } from 'aws-lambda';
import { METRICS } from '../lib/kernel/telemetry.ts';
import { intake } from '../lib/pipeline/intake.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';

const runtime = lambdaRuntime(process.env);

export async function handler(
  event: CloudWatchLogsEvent,
): Promise<{ accepted: number; ignored: number; rejected: number; queued: number }> {
  const { summary, parsed } = await intake(JSON.stringify(event), { ...runtime.intakeDeps(), format: 'cloudwatch' });
  runtime.telemetry.metric(METRICS.changesReceived, summary.accepted, 'Count');
  for (const r of parsed.rejected) runtime.telemetry.warn('rejected log event', { record: r.record, error: r.error });
  runtime.telemetry.info('log events processed', { ...summary });
  runtime.telemetry.flush();
  return summary;
}
