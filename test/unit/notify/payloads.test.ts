/**
 * Payload shapes, checked against small schemas written from the sinks' documentation:
 * - Slack incoming webhooks (https://api.slack.com/messaging/webhooks) take `text` and `blocks`; a `section` block's
 *   `text` is a text object `{ type: "mrkdwn" | "plain_text", text }` of at most 3000 characters, a `header` block's
 *   `plain_text` at most 150 (https://api.slack.com/reference/block-kit/blocks);
 * - Teams incoming webhooks and Workflows take `{ type: "message", attachments: [{ contentType:
 *   "application/vnd.microsoft.card.adaptive", content }] }` where `content` is an AdaptiveCard: `type:
 *   "AdaptiveCard"`, a `version`, a `body` of elements (https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using,
 *   https://adaptivecards.io/explorer/AdaptiveCard.html).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EVENT_BOUNDS, eventId, rotationEvent, type NotificationEvent } from '../../../lib/notify/event.ts';
import {
  boundedJson,
  MAX_PAYLOAD_BYTES,
  slackEscape,
  slackPayload,
  snsPayload,
  teamsEscape,
  teamsPayload,
  webhookPayload,
} from '../../../lib/notify/payloads.ts';

const SlackText = z.strictObject({
  type: z.enum(['mrkdwn', 'plain_text']),
  text: z.string().min(1).max(3000),
  emoji: z.boolean().optional(),
});
const SlackBlock = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('header'),
    text: z.strictObject({
      type: z.literal('plain_text'),
      text: z.string().min(1).max(150),
      emoji: z.boolean().optional(),
    }),
  }),
  z.strictObject({ type: z.literal('section'), text: SlackText }),
  z.strictObject({ type: z.literal('context'), elements: z.array(SlackText).min(1).max(10) }),
]);
const SlackMessage = z.strictObject({ text: z.string().min(1), blocks: z.array(SlackBlock).min(1).max(50) });

const AdaptiveElement = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('TextBlock'), text: z.string().min(1) }),
  z.looseObject({
    type: z.literal('FactSet'),
    facts: z.array(z.strictObject({ title: z.string(), value: z.string() })).min(1),
  }),
]);
const TeamsMessage = z.strictObject({
  type: z.literal('message'),
  attachments: z
    .array(
      z.strictObject({
        contentType: z.literal('application/vnd.microsoft.card.adaptive'),
        contentUrl: z.null().optional(),
        content: z.looseObject({
          type: z.literal('AdaptiveCard'),
          version: z.string().regex(/^1\.\d$/),
          body: z.array(AdaptiveElement).min(1),
          $schema: z.string().optional(),
        }),
      }),
    )
    .length(1),
});

const halted: NotificationEvent = rotationEvent(
  {
    kind: 'halted',
    rotation: 'a1b2c3d4e5f60718',
    route: 'payments-db',
    at: '2026-11-27T10:00:00.000Z',
    secrets: ['secret/app/db version 2'],
    wave: 1,
    waves: 3,
    cluster: 'staging',
    workload: { namespace: 'payments', kind: 'Deployment', name: 'api' },
    reason: 'rollout timeout: 1 of 1 new pods not Ready <&> after 6 s',
    notRestarted: ['prod-eu', 'prod-us'],
  },
  'wave 1',
);

describe('notification payloads', () => {
  it('Slack: text and blocks (header, mrkdwn section, context) as the Block Kit reference describes them; &, <, > escaped', () => {
    const p = slackPayload(halted);
    expect(SlackMessage.safeParse(p).error).toBeUndefined();
    const section = JSON.stringify(p.blocks[1]);
    expect(section).toContain('*Wave:* 1 of 3');
    expect(section).toContain('&lt;&amp;&gt;');
    expect(section).toContain('Not restarted:* prod-eu, prod-us');
  });

  it('Teams: a message with one Adaptive Card attachment (type, version, body)', () => {
    const p = teamsPayload(halted);
    expect(TeamsMessage.safeParse(p).error).toBeUndefined();
    expect(JSON.stringify(p)).toContain('"title":"Workload","value":"Deployment payments/api"');
  });

  it('webhook and SNS: the event under its schema name; an SNS subject is ASCII and at most 100 characters', () => {
    expect(webhookPayload(halted)).toMatchObject({
      schema: 'vault-rollout.notification/v1',
      id: halted.id,
      kind: 'halted',
      wave: 1,
    });
    const long = rotationEvent({ ...halted, secrets: [`secret/${'é'.repeat(200)} version 9`] });
    const { subject, message } = snsPayload(long);
    expect(subject.length).toBeLessThanOrEqual(100);
    expect(subject).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(message)).toMatchObject({ kind: 'halted' });
  });

  it('bounds: a huge event stays far below the payload limit in every shape', () => {
    const huge = rotationEvent({
      ...halted,
      secrets: Array.from({ length: 5000 }, (_, i) => `secret/${'x'.repeat(900)}/${i} version 1`),
      reason: 'y'.repeat(100_000),
      notRestarted: Array.from({ length: 500 }, (_, i) => `cluster-${i}`),
    });
    expect(huge.secrets).toHaveLength(EVENT_BOUNDS.list + 1);
    for (const p of [slackPayload(huge), teamsPayload(huge), webhookPayload(huge)])
      expect(Buffer.byteLength(boundedJson(p))).toBeLessThan(MAX_PAYLOAD_BYTES);
    expect(SlackMessage.safeParse(slackPayload(huge)).error).toBeUndefined();
    expect(() => boundedJson({ x: 'z'.repeat(MAX_PAYLOAD_BYTES) })).toThrow(/over/);
  });

  it('the event id is stable for the same rotation, kind and place, and differs otherwise', () => {
    expect(eventId('halted', 'r1', 'wave 1')).toBe(eventId('halted', 'r1', 'wave 1'));
    expect(
      new Set([
        eventId('halted', 'r1', 'wave 1'),
        eventId('halted', 'r1', 'wave 2'),
        eventId('complete', 'r1', 'wave 1'),
        eventId('halted', 'r2', 'wave 1'),
      ]).size,
    ).toBe(4);
  });
});

describe('text from the clusters is shown as written, never as markup', () => {
  // A tenant's object may carry a reason (an Event message, a condition) or a name that tries to be markup.
  const hostile =
    '[click me](https://evil.example) **urgent** _x_ `code` <!channel> <https://evil.example|ok>\n- injected list\n# heading';
  const e = rotationEvent(
    {
      ...halted,
      reason: hostile,
      workload: { namespace: 'payments', kind: 'Deployment', name: '*bold*' },
    } as Parameters<typeof rotationEvent>[0],
    'wave 1',
  );

  it('Teams: markdown characters backslash-escaped, a list marker at the start escaped, one line per fact', () => {
    const card = JSON.stringify(teamsPayload(e));
    const facts =
      (
        teamsPayload(e).attachments as Array<{
          content: { body: Array<{ facts?: Array<{ title: string; value: string }> }> };
        }>
      )[0]?.content.body[1]?.facts ?? [];
    const reason = facts.find((f) => f.value.includes('click me'))?.value ?? '';
    expect(reason).toContain('\\[click me\\]\\(https://evil.example\\)');
    expect(reason).toContain('\\*\\*urgent\\*\\*');
    expect(reason).toContain('\\_x\\_');
    expect(reason).toContain('\\`code\\`');
    expect(reason).not.toMatch(/\n/);
    expect(reason).toContain(' - injected list \\# heading');
    expect(card).toContain('Deployment payments/\\\\*bold\\\\*');
    expect(teamsEscape('- a list item')).toBe('\\- a list item');
    expect(teamsEscape('1. first')).toBe('\\1. first');
  });

  it('Slack: no mention, link or emphasis can form; one line per fact', () => {
    const section = (slackPayload(e).blocks[1] as { text: { text: string } }).text.text;
    expect(section).not.toContain('<!channel>');
    expect(section).toContain('&lt;!channel&gt;');
    expect(section).not.toMatch(/<https?:/);
    expect(section).not.toContain('**urgent**');
    expect(section).toContain('*\u200b*\u200burgent*\u200b*\u200b');
    expect(section.split('\n').every((line) => line.startsWith('*'))).toBe(true);
    expect(slackEscape('a_b')).toBe('a_\u200bb');
  });
});
