/**
 * The sinks, resolved from the routing table and the environment once at start-up: the secrets (Slack and Teams
 * URLs, the webhook's HMAC key) come from the variables the table names, never from the table. A URL must be https;
 * plain http only to a loopback host and only with VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP=1 (tests). A link-local
 * or cloud metadata address (169.254.169.254 and the like) is refused, as written and as resolved before each send,
 * unless VAULT_ROLLOUT_NOTIFY_ALLOW_LINK_LOCAL=1: a table's writer must not make serve post to the instance's
 * credentials endpoint. The webhook's key signs in a context of its own (signNotification) and must not be one of
 * the intake's secrets. A sink whose variable is missing or wrong is a problem, reported by name: the others still
 * work.
 *
 * Sending: one POST (or SNS Publish) per attempt, at most SINK_TIMEOUT_MS, no redirects followed (a redirect could
 * carry the body elsewhere). Errors say the sink, the status or the error's name: never the URL or the secret.
 */
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { timingSafeEqual } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { signNotification, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../kernel/hmac-signature.ts';
import type { NotificationSink } from '../routing/notifications-schema.ts';
import type { NotificationEvent } from './event.ts';
import { boundedJson, slackPayload, snsPayload, teamsPayload, webhookPayload } from './payloads.ts';

export const SINK_TIMEOUT_MS = 5000;
export const ALLOW_LOOPBACK_HTTP_ENV = 'VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP';
export const ALLOW_LINK_LOCAL_ENV = 'VAULT_ROLLOUT_NOTIFY_ALLOW_LINK_LOCAL';
/** The intake's secrets: a webhook sink's key must be none of them. */
const INTAKE_SECRET_VARIABLES = [
  'VAULT_ROLLOUT_WEBHOOK_SECRET',
  'VAULT_ROLLOUT_WEBHOOK_TOKEN',
  'VAULT_ROLLOUT_STATUS_TOKEN',
] as const;

export interface Sink {
  name: string;
  type: NotificationSink['type'];
  /** Sends the event once; throws a SinkError (no URL, no secret in it) when it was not accepted. */
  send(event: NotificationEvent): Promise<void>;
}

export class SinkError extends Error {
  override readonly name = 'SinkError';
}

export interface SinkOptions {
  env: Readonly<Record<string, string | undefined>>;
  fetch?: typeof fetch;
  sns?: Pick<SNSClient, 'send'>;
  timeoutMs?: number;
  nowSeconds?: () => number;
  /** Resolves a host name to its addresses before each send (tests pass their own). */
  lookup?: (host: string) => Promise<string[]>;
}

/** The environment variables the sinks name (URLs, HMAC keys): what a process must be given, sorted. */
export function sinkVariables(sinks: ReadonlyMap<string, NotificationSink>): string[] {
  const names = new Set<string>();
  for (const sink of sinks.values()) {
    if (sink.type === 'slack' || sink.type === 'teams') names.add(sink.urlFromEnv);
    if (sink.type === 'webhook') {
      if (sink.urlFromEnv !== undefined) names.add(sink.urlFromEnv);
      names.add(sink.secretFromEnv);
    }
  }
  return [...names].sort();
}

/**
 * The SNS topics the sinks publish to, sorted: all the notify function may publish to (lib/deploy/iam-from-routes.ts).
 */
export const sinkTopics = (sinks: ReadonlyMap<string, NotificationSink>): string[] =>
  [...new Set([...sinks.values()].flatMap((s) => (s.type === 'sns' ? [s.topicArn] : [])))].sort();

/** Lambda keeps sink secrets in SSM Parameter Store: the variable `NAME` is the SecureString `<prefix>/NAME`. */
export const sinkParameterName = (prefix: string, variable: string): string =>
  `${prefix.replace(/\/+$/, '')}/${variable}`;

/**
 * Lambda: the environment the sinks resolve from — the process's, with each variable the sinks name and the process
 * lacks read from its SSM parameter (`read` returns undefined for a missing one: that sink is then not usable).
 */
export async function sinkEnvironment(
  sinks: ReadonlyMap<string, NotificationSink>,
  env: SinkOptions['env'],
  prefix: string,
  read: (name: string) => Promise<string | undefined>,
): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = { ...env };
  for (const variable of sinkVariables(sinks))
    if (!out[variable]) out[variable] = await read(sinkParameterName(prefix, variable));
  return out;
}

/** Names of cloud instance metadata services. */
const METADATA_HOSTS = new Set([
  'metadata.google.internal',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
  'metadata.azure.internal',
]);

/**
 * An IP address (as a URL's hostname writes it, IPv6 in brackets) that is link-local or a metadata service:
 * 169.254.0.0/16 (AWS, GCP, Azure, OpenStack), fe80::/10, fd00:ec2::254 (AWS over IPv6), 100.100.100.200 (Alibaba).
 */
export function isLinkLocalOrMetadata(host: string): boolean {
  const address = host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/^::ffff:/, '');
  if (isIP(address) === 4) return address.startsWith('169.254.') || address === '100.100.100.200';
  if (isIP(address) === 6) return /^fe[89ab][0-9a-f]:/.test(address) || address === 'fd00:ec2::254';
  return false;
}

/** Checks a sink's URL: the problem, or undefined. Never quotes the URL (it is a secret for Slack and Teams). */
export function urlProblem(text: string | undefined, variable: string, env: SinkOptions['env']): string | undefined {
  if (text === undefined || text === '') return `${variable} is not set`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `${variable} is not a URL`;
  }
  if (url.username || url.password) return `${variable}: a URL with credentials in it is refused`;
  const metadata = METADATA_HOSTS.has(url.hostname.toLowerCase()) || isLinkLocalOrMetadata(url.hostname);
  if (metadata && env[ALLOW_LINK_LOCAL_ENV] !== '1') {
    return `${variable}: a link-local or cloud metadata address is refused (${ALLOW_LINK_LOCAL_ENV}=1 allows it)`;
  }
  if (url.protocol === 'https:') return undefined;
  const loopback = url.hostname === '127.0.0.1' || url.hostname === '[::1]' || url.hostname === 'localhost';
  if (url.protocol === 'http:' && loopback && env[ALLOW_LOOPBACK_HTTP_ENV] === '1') return undefined;
  return `${variable} must be an https URL${loopback ? ` (plain http to loopback only with ${ALLOW_LOOPBACK_HTTP_ENV}=1)` : ''}`;
}

/** Every sink the table names, resolved: a Sink, or the problem that keeps it from working. */
export function resolveSinks(
  sinks: ReadonlyMap<string, NotificationSink>,
  options: SinkOptions,
): { sinks: Map<string, Sink>; problems: Map<string, string> } {
  const resolved = new Map<string, Sink>();
  const problems = new Map<string, string>();
  for (const [name, config] of sinks) {
    const sink = resolveSink(name, config, options);
    if (typeof sink === 'string') problems.set(name, sink);
    else resolved.set(name, sink);
  }
  return { sinks: resolved, problems };
}

function resolveSink(name: string, config: NotificationSink, options: SinkOptions): Sink | string {
  const { env } = options;
  if (config.type === 'sns') return snsSink(name, config.topicArn, options);
  const variable = config.type === 'webhook' ? config.urlFromEnv : config.urlFromEnv;
  const url = variable === undefined ? (config.type === 'webhook' ? config.url : undefined) : env[variable];
  const problem = urlProblem(url, variable ?? 'url', env);
  if (problem) return problem;
  let secret: string | undefined;
  if (config.type === 'webhook') {
    secret = env[config.secretFromEnv];
    const keyProblem = webhookKeyProblem(config.secretFromEnv, secret, env);
    if (keyProblem !== undefined) return keyProblem;
  }
  const render = config.type === 'slack' ? slackPayload : config.type === 'teams' ? teamsPayload : webhookPayload;
  const endpoint: Endpoint = { name, url: url as string, secret, fetch: options.fetch ?? fetch };
  return { name, type: config.type, send: (event) => postEvent(endpoint, event.id, () => render(event), options) };
}

/** A sink that publishes to an SNS topic, through the AWS SDK and the process's credentials. */
function snsSink(name: string, topicArn: string, options: SinkOptions): Sink {
  const client = options.sns ?? new SNSClient({ region: topicArn.split(':')[3] });
  return {
    name,
    type: 'sns',
    send: async (event) => {
      const { subject, message } = snsPayload(event);
      const fifo = topicArn.endsWith('.fifo')
        ? { MessageGroupId: event.rotation.slice(0, 128), MessageDeduplicationId: event.id }
        : {};
      try {
        await client.send(new PublishCommand({ TopicArn: topicArn, Subject: subject, Message: message, ...fifo }), {
          abortSignal: AbortSignal.timeout(options.timeoutMs ?? SINK_TIMEOUT_MS),
        });
      } catch (e) {
        throw new SinkError(`sink ${name}: SNS Publish failed: ${e instanceof Error ? e.name : 'error'}`);
      }
    },
  };
}

/** Why the webhook's HMAC key cannot be used: unset, short, or one of the intake's own keys. */
function webhookKeyProblem(variable: string, secret: string | undefined, env: SinkOptions['env']): string | undefined {
  if (!secret) return `${variable} is not set (the webhook sink's HMAC key)`;
  if (secret.length < 16) return `${variable} is shorter than 16 characters`;
  const reused = INTAKE_SECRET_VARIABLES.find((name) => env[name] === secret);
  if (reused !== undefined) {
    return (
      `${variable} is the same key as ${reused}: ` +
      'give notifications a key of their own (a receiver holding it could sign changes)'
    );
  }
  return undefined;
}

/** Where a sink's events are POSTed, the key they are signed with (webhook), and the fetch that sends them. */
interface Endpoint {
  name: string;
  url: string;
  secret: string | undefined;
  fetch: typeof fetch;
}

/** POSTs one event's payload to the sink's URL, signed when the sink has a key; throws SinkError when it fails. */
async function postEvent(
  { name, url, secret, fetch: doFetch }: Endpoint,
  eventId: string,
  payload: () => unknown,
  options: SinkOptions,
): Promise<void> {
  await checkResolvedHost(name, url, options);
  const body = boundedJson(payload());
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'vault-rollout' };
  if (secret !== undefined) {
    const timestamp = String(Math.floor(options.nowSeconds?.() ?? Date.now() / 1000));
    headers[TIMESTAMP_HEADER] = timestamp;
    headers[SIGNATURE_HEADER] = signNotification(secret, timestamp, body);
    headers['x-vault-rollout-event-id'] = eventId;
  }
  let response: Response;
  try {
    response = await doFetch(url, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? SINK_TIMEOUT_MS),
    });
  } catch (e) {
    const why =
      e instanceof Error
        ? e.name === 'TimeoutError' || e.name === 'AbortError'
          ? `no answer within ${options.timeoutMs ?? SINK_TIMEOUT_MS} ms`
          : e.name
        : 'error';
    throw new SinkError(`sink ${name}: ${why}`);
  }
  // The body is read (and dropped) so the connection is released; its text is never logged (it may echo the URL).
  await response.arrayBuffer().catch(() => undefined);
  if (response.status < 200 || response.status > 299) throw new SinkError(`sink ${name}: HTTP ${response.status}`);
}

/** Refuses to send when the sink's host name resolves to a link-local or metadata address (unless allowed). */
async function checkResolvedHost(name: string, url: string, options: SinkOptions): Promise<void> {
  if (options.env[ALLOW_LINK_LOCAL_ENV] === '1') return;
  const host = new URL(url).hostname;
  if (isIP(host.replace(/^\[|\]$/g, '')) !== 0) return;
  let addresses: string[];
  try {
    addresses = await (options.lookup ?? defaultLookup)(host);
  } catch (e) {
    const why = e instanceof Error ? ((e as { code?: string }).code ?? e.name) : 'error';
    throw new SinkError(`sink ${name}: the host cannot be resolved (${why})`);
  }
  if (addresses.some(isLinkLocalOrMetadata)) {
    const allow = `${ALLOW_LINK_LOCAL_ENV}=1 allows it`;
    throw new SinkError(
      `sink ${name}: the host resolves to a link-local or cloud metadata address; refused (${allow})`,
    );
  }
}

const defaultLookup = async (host: string): Promise<string[]> =>
  (await dnsLookup(host, { all: true })).map((a) => a.address);

/**
 * A receiver's check of a webhook notification (for receivers in TypeScript, and the tests): the signature over
 * NOTIFICATION_CONTEXT, the timestamp and the body, within `maxSkewSeconds` of `nowSeconds`.
 */
export function verifyNotification(
  secret: string,
  header: (name: string) => string | undefined,
  body: Uint8Array | string,
  nowSeconds: number,
  maxSkewSeconds = 300,
): { ok: true } | { ok: false; reason: string } {
  const timestamp = header(TIMESTAMP_HEADER);
  if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, reason: `${TIMESTAMP_HEADER} must be unix seconds` };
  }
  if (Math.abs(nowSeconds - Number(timestamp)) > maxSkewSeconds) {
    return { ok: false, reason: `${TIMESTAMP_HEADER} is more than ${maxSkewSeconds} s from the clock` };
  }
  const expected = Buffer.from(signNotification(secret, timestamp, body));
  const given = Buffer.from(header(SIGNATURE_HEADER) ?? '');
  if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true };
  return { ok: false, reason: 'the signature does not match the body' };
}
