/**
 * Each sink's payload for an event, pure:
 * - Slack incoming webhook: `text` (the fallback shown in notifications) and `blocks` — a header and a `section` of
 *   `mrkdwn` text (https://api.slack.com/messaging/webhooks, https://api.slack.com/reference/block-kit/blocks);
 *   a section's text is at most 3000 characters, a header's 150.
 * - Teams incoming webhook / Workflows: `{ type: "message", attachments: [{ contentType:
 *   "application/vnd.microsoft.card.adaptive", content: AdaptiveCard }] }` with an AdaptiveCard 1.4 `body` of
 *   TextBlocks and a FactSet
 *   (https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using).
 * - webhook: the event itself, under a schema name, signed (lib/notify/sinks.ts).
 * - SNS: a subject (at most 100 ASCII characters) and the event as JSON.
 * Every payload is bounded (MAX_PAYLOAD_BYTES); an event is bounded before (lib/notify/event.ts).
 */
import { eventLines, eventTitle, type NotificationEvent } from './event.ts';

export const MAX_PAYLOAD_BYTES = 16 * 1024;
export const WEBHOOK_SCHEMA = 'vault-rollout.notification/v1';

/** One fact per line: a line break inside a value would start a paragraph or a list item. */
const oneLine = (s: string): string => s.replace(/[\r\n\u2028\u2029]+/g, ' ');
/**
 * Text from the clusters and Vault (paths, names, reasons a tenant's object may carry) shown as written, never as
 * markup. Slack's mrkdwn: &, < and > escaped as its docs ask (so no <!channel>, <@user> or <url|link>); its
 * emphasis characters (* _ ~ `) cannot be escaped, so a zero-width space after each keeps it from pairing; line
 * breaks become spaces (one fact, one line).
 */
export const slackEscape = (s: string): string =>
  oneLine(s)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[*_~`]/g, '$&\u200b');
/**
 * Teams (Adaptive Card TextBlock and FactSet markdown): the characters its markdown reads — emphasis, links, code —
 * backslash-escaped, and a list marker at the start escaped too; line breaks become spaces.
 */
export const teamsEscape = (s: string): string =>
  oneLine(s)
    .replace(/[\\`*_[\]()<>#~|]/g, '\\$&')
    .replace(/^(\s*)([-+]|\d+[.)])(?=\s)/, '$1\\$2');
const cut = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export function slackPayload(e: NotificationEvent): { text: string; blocks: unknown[] } {
  const title = `${eventTitle(e)}${e.secrets[0] ? `: ${e.secrets[0]}` : ''}`;
  const lines = eventLines(e).map((l) => {
    const i = l.indexOf(': ');
    return `*${slackEscape(l.slice(0, i))}:* ${slackEscape(l.slice(i + 2))}`;
  });
  return {
    text: cut(slackEscape(`vault-rollout: ${title}`), 3000),
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: cut(title, 150), emoji: false } },
      { type: 'section', text: { type: 'mrkdwn', text: cut(lines.join('\n'), 3000) } },
      {
        type: 'context',
        elements: [{ type: 'mrkdwn', text: cut(slackEscape(`vault-rollout · ${e.kind} · ${e.at}`), 3000) }],
      },
    ],
  };
}

export function teamsPayload(e: NotificationEvent): Record<string, unknown> {
  const facts = eventLines(e).map((l) => {
    const i = l.indexOf(': ');
    return { title: teamsEscape(l.slice(0, i)), value: teamsEscape(l.slice(i + 2)) };
  });
  const failing = e.kind !== 'complete';
  const title = teamsEscape(eventTitle(e));
  const color = failing ? 'Attention' : 'Good';
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            { type: 'TextBlock', text: `vault-rollout: ${title}`, weight: 'Bolder', size: 'Medium', wrap: true, color },
            { type: 'FactSet', facts },
            { type: 'TextBlock', text: teamsEscape(`${e.kind} · ${e.at}`), isSubtle: true, size: 'Small', wrap: true },
          ],
        },
      },
    ],
  };
}

export function webhookPayload(e: NotificationEvent): Record<string, unknown> {
  return { schema: WEBHOOK_SCHEMA, title: eventTitle(e), ...e };
}

export function snsPayload(e: NotificationEvent): { subject: string; message: string } {
  // SNS subjects: ASCII, no line breaks, at most 100 characters.
  const ascii = `vault-rollout: ${eventTitle(e)}${e.secrets[0] ? ` ${e.secrets[0]}` : ''}`.replace(
    /[^\x20-\x7e]/g,
    '?',
  );
  const subject = ascii.length > 100 ? `${ascii.slice(0, 97)}...` : ascii;
  return { subject, message: JSON.stringify(webhookPayload(e)) };
}

/** The body to send, within MAX_PAYLOAD_BYTES: a payload over it (cannot happen with bounded events) is refused. */
export function boundedJson(payload: unknown): string {
  const text = JSON.stringify(payload);
  if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES)
    throw new Error(`the payload is ${Buffer.byteLength(text)} bytes, over ${MAX_PAYLOAD_BYTES}`);
  return text;
}
