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
  logEvents: z.array(z.object({ id: z.string().optional(), timestamp: z.number().optional(), message: z.string() })).default([]),
});
export type CloudWatchLogsData = z.infer<typeof CloudWatchLogsDataSchema>;

export function isCloudWatchEnvelope(v: unknown): v is { awslogs: { data: unknown } } {
  return isObject(v) && isObject(v.awslogs) && 'data' in v.awslogs;
}

export function isCloudWatchData(v: unknown): v is Record<string, unknown> {
  return isObject(v) && typeof v.messageType === 'string' && 'logEvents' in v;
}

/** Decodes `awslogs.data`; errors say which step failed, never what the bytes were. */
export function decodeCloudWatchEnvelope(envelope: { awslogs: { data: unknown } }, maxBytes = 64 * 1024 * 1024): CloudWatchLogsData | { error: string } {
  const data = envelope.awslogs.data;
  if (typeof data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return { error: 'awslogs.data: not base64' };
  let json: string;
  try {
    json = gunzipSync(Buffer.from(data, 'base64'), { maxOutputLength: maxBytes }).toString('utf8');
  } catch {
    return { error: 'awslogs.data: not gzip' };
  }
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return { error: 'awslogs.data: the decompressed data is not JSON' };
  }
  return parseCloudWatchData(value);
}

export function parseCloudWatchData(value: unknown): CloudWatchLogsData | { error: string } {
  const parsed = CloudWatchLogsDataSchema.safeParse(value);
  return parsed.success ? parsed.data : { error: `not CloudWatch Logs data: ${describeIssues(parsed.error.issues)}` };
}
