/**
 * The notifications block of the routing table schema (lib/routing/schema.ts): the events, the sinks they go to, and
 * when a slow rollout is reported.
 */
import { z } from 'zod';
import { DurationSchema } from './schema-fields.ts';

/**
 * Notifications: where rotation events go. Sink secrets — the Slack and Teams webhook URLs (whoever holds
 * one can post to the channel), the webhook's HMAC key — are named by environment variable, never written in the
 * table; the table is read by editors, CI and `plan`. The URLs are checked when a process reads them (https only).
 */
export const NotificationEvents = [
  'halted',
  'target-failed',
  'rollout-failed',
  'complete',
  'progressing',
  'dead-letter',
  'would-restart',
  'approval-requested',
] as const;
export type NotificationEventKind = (typeof NotificationEvents)[number];

const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
const envName = z.string().regex(ENV_NAME, 'must be an environment variable name (A-Z, 0-9, _)');

const SINK_TYPE = 'slack, teams (incoming webhooks), webhook (a signed JSON POST) or sns (an SNS topic)';

export const NotificationSinkSchema = z
  .discriminatedUnion(
    'type',
    [
      z.strictObject({
        type: z.literal('slack').describe(SINK_TYPE),
        urlFromEnv: envName.describe('environment variable holding the Slack incoming-webhook URL (a secret)'),
      }),
      z.strictObject({
        type: z.literal('teams').describe(SINK_TYPE),
        urlFromEnv: envName.describe(
          'environment variable holding the Teams incoming-webhook or Workflows URL (a secret)',
        ),
      }),
      z
        .strictObject({
          type: z.literal('webhook').describe(SINK_TYPE),
          url: z
            .url({ protocol: /^https$/, error: 'must be an https URL' })
            .optional()
            .describe('the receiver (https); or urlFromEnv'),
          urlFromEnv: envName.optional().describe('environment variable holding the receiver URL'),
          secretFromEnv: envName.describe('environment variable holding the HMAC-SHA256 key the body is signed with'),
        })
        .refine((w) => (w.url === undefined) !== (w.urlFromEnv === undefined), 'give exactly one of url or urlFromEnv'),
      z.strictObject({
        type: z.literal('sns').describe(SINK_TYPE),
        topicArn: z
          .string()
          .regex(
            /^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/,
            'must be an SNS topic ARN',
          )
          .describe("the topic the event is published to (through the AWS SDK, the process's credentials)"),
      }),
    ],
    {
      error:
        'a sink is { type: slack | teams, urlFromEnv }, { type: webhook, url | urlFromEnv, secretFromEnv } or { type: sns, topicArn }',
    },
  )
  .describe('one sink, by its type');
export type NotificationSink = z.infer<typeof NotificationSinkSchema>;

export const NotificationsSchema = z
  .strictObject({
    sinks: z
      .record(
        z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'sink names are lowercase letters, digits and "-"'),
        NotificationSinkSchema,
      )
      .default({})
      .describe("named sinks; a route's block adds sinks or overrides one of the same name"),
    events: z
      .array(z.enum(NotificationEvents))
      .min(1)
      .optional()
      .describe("which events are sent (default: all); a route's list replaces the top-level one"),
    progressingAfter: DurationSchema.optional().describe(
      'a rollout still progressing this long after its restart sends one progressing event (default 15m)',
    ),
  })
  .describe("where rotation events are sent; at the top level every route's default, on a route added to it");
export type NotificationsSettings = z.infer<typeof NotificationsSchema>;
