/**
 * CloudWatch Logs subscription events, as delivered to a Lambda function: `{"awslogs":{"data":"<base64 gzip>"}}`.
 * The decoded document's log events are the records (each message is one raw audit line); a CONTROL_MESSAGE,
 * which CloudWatch sends to check the destination is reachable, counts as one ignored record.
 */
import { gunzipSync } from 'node:zlib';
import { z } from 'zod';
import { describeIssues, isObject } from './record.ts';

export const CloudWatchLogsDataSchema = z.object({
  messageType: z.string(),
  logGroup: z.string().optional(),
  logStream: z.string().optional(),
  logEvents: z
    .array(z.object({ id: z.string().optional(), timestamp: z.number().optional(), message: z.string() }))
    .default([]),
});
export type CloudWatchLogsData = z.infer<typeof CloudWatchLogsDataSchema>;

export function isCloudWatchEnvelope(v: unknown): v is { awslogs: { data: unknown } } {
  return isObject(v) && isObject(v.awslogs) && 'data' in v.awslogs;
}

export function isCloudWatchData(v: unknown): v is Record<string, unknown> {
  return isObject(v) && typeof v.messageType === 'string' && 'logEvents' in v;
}

/**
 * The most one input may inflate from `awslogs.data`, all envelopes together. A real subscription delivery is made of
 * PutLogEvents batches (at most 1 MiB of messages each) and fits Lambda's 6 MB event; 16 MiB leaves ample room and
 * keeps a crafted envelope (1.6 MB that inflates to 1.2 GiB) from taking the function's memory.
 */
export const MAX_CLOUDWATCH_INFLATED_BYTES = 16 * 1024 * 1024;

/**
 * Decodes `awslogs.data`, inflating at most `maxBytes` (zlib stops there: nothing beyond the cap is produced); errors
 * say which step failed, never what the bytes were. `inflatedBytes` lets the caller charge a per-input budget, whose
 * total (`limit`) the error names.
 */
export function decodeCloudWatchEnvelope(
  envelope: { awslogs: { data: unknown } },
  maxBytes = MAX_CLOUDWATCH_INFLATED_BYTES,
  limit = maxBytes,
): (CloudWatchLogsData & { inflatedBytes: number }) | { error: string } {
  const data = envelope.awslogs.data;
  if (typeof data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return { error: 'awslogs.data: not base64' };
  let inflated: Buffer;
  try {
    inflated = gunzipSync(Buffer.from(data, 'base64'), { maxOutputLength: Math.max(1, maxBytes) });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      return {
        error: `awslogs.data: refused, it decompresses past the limit of ${limit} bytes for all CloudWatch Logs data of one input (a real delivery is far smaller)`,
      };
    return { error: 'awslogs.data: not gzip' };
  }
  let value: unknown;
  try {
    value = JSON.parse(inflated.toString('utf8'));
  } catch {
    return { error: 'awslogs.data: the decompressed data is not JSON' };
  }
  const parsed = parseCloudWatchData(value);
  return 'error' in parsed ? parsed : { ...parsed, inflatedBytes: inflated.byteLength };
}

export function parseCloudWatchData(value: unknown): CloudWatchLogsData | { error: string } {
  const parsed = CloudWatchLogsDataSchema.safeParse(value);
  return parsed.success ? parsed.data : { error: `not CloudWatch Logs data: ${describeIssues(parsed.error.issues)}` };
}
