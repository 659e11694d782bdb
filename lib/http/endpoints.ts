/**
 * Every HTTP endpoint vault-rollout answers: the app of `serve` and the Lambda HTTP function (app.ts), and the scrape
 * listener of `worker`/`relay --metrics-port` (lib/observability/metrics-server.ts). docs/reference/http-api.md is
 * generated from this table; test/unit/docs/reference.test.ts compares it with the routes app.ts registers, so a
 * route added without its line here fails.
 */

/**
 * Which process answers it: `serve`, the Lambda HTTP function, or the `--metrics-port` listener of worker and relay.
 */
export type HttpServer = 'serve' | 'lambda' | 'metrics-listener';

export interface HttpEndpoint {
  method: 'GET' | 'POST';
  path: string;
  servers: readonly HttpServer[];
  /** Present only with this option (serve's flag); undefined: always. */
  when?: string;
  auth: string;
  /** Status code -> what it means. */
  statuses: Readonly<Record<number, string>>;
  description: string;
}

const WEBHOOK_AUTH =
  'the webhook authentication: `X-Vault-Rollout-Signature: sha256=<HMAC>` with `X-Vault-Rollout-Timestamp` (HMAC secret), and/or `Authorization: Bearer <token>`';

const INTAKE_STATUSES = {
  202: 'accepted: the changes are queued (durably); the body counts accepted, ignored and rejected records, with the first errors and problems',
  400: 'an empty body, gzip that is not gzip, a body that is not UTF-8',
  401: 'not authenticated (missing or wrong signature or token, a timestamp out of the 300 s window, a replayed signature)',
  413: 'the body (or its decompressed form) is over the limit',
  503: 'the queue is unavailable: nothing was accepted, retry',
} as const;

export const HTTP_ENDPOINTS: readonly HttpEndpoint[] = [
  {
    method: 'POST',
    path: '/v1/vault/audit',
    servers: ['serve', 'lambda'],
    auth: WEBHOOK_AUTH,
    statuses: INTAKE_STATUSES,
    description:
      "Vault audit entries, event notifications or a log shipper's batch (Fluent Bit, Vector, CloudWatch Logs subscription); every format is taken whatever the Content-Type; `Content-Encoding: gzip` is inflated after authentication.",
  },
  {
    method: 'POST',
    path: '/v1/vault/events',
    servers: ['serve', 'lambda'],
    auth: WEBHOOK_AUTH,
    statuses: INTAKE_STATUSES,
    description: 'The same intake under a second name, for event-notification forwarders.',
  },
  {
    method: 'GET',
    path: '/healthz',
    servers: ['serve', 'lambda'],
    auth: 'none',
    statuses: { 200: '`{ ok: true, routes, clusters }`' },
    description: 'Liveness: touches nothing.',
  },
  {
    method: 'GET',
    path: '/readyz',
    servers: ['serve', 'lambda'],
    auth: 'none',
    statuses: {
      200: '`{ ok: true }`',
      503: '`{ ok: false, reasons }`: the queue cannot be written, or the worker loops are stuck (`VAULT_ROLLOUT_READY_STUCK_SECONDS`)',
    },
    description: 'Readiness: whether accepted work would be queued and worked.',
  },
  {
    method: 'GET',
    path: '/metrics',
    servers: ['serve'],
    auth: 'none (bind it where only the scraper reaches)',
    statuses: { 200: "Prometheus's text exposition format" },
    description: 'Prometheus metrics (see the metrics reference).',
  },
  {
    method: 'GET',
    path: '/status',
    servers: ['serve'],
    when: '`serve --status-page`',
    auth: "the bearer token (also as a browser's Basic password), or a signed empty body",
    statuses: {
      200: 'the status page (HTML, compressed when accepted)',
      401: 'not authenticated (with a Basic challenge when a bearer token is set)',
    },
    description: "The fleet status page: `status`'s data as HTML.",
  },
  {
    method: 'GET',
    path: '/safe-to-revoke',
    servers: ['serve'],
    when: '`serve --status-page`',
    auth: "the status page's: the bearer token (also as a browser's Basic password), or a signed empty body",
    statuses: {
      200: '`{ safe: true, path, current, consumers, ready, pods: { onRecorded, older }, waitingFor: [], reasons: [] }`',
      400: '`{ error }`: no `path` query, or not one literal Vault path (at most 1,024 characters)',
      401: 'not authenticated',
      409: '`{ safe: false, … }`: the same document, with the consumers not yet safe (`waitingFor`) and the `reasons`',
    },
    description:
      "May the old credential of `?path=P` be revoked: `status --path P --safe-to-revoke` as JSON, from the page's read of the fleet (reused for 5 s); safe only when every routed consumer is current and rolled out, no pod of an older revision runs and no rotation of the path is halted.",
  },
  {
    method: 'GET',
    path: '/metrics',
    servers: ['metrics-listener'],
    when: '`worker` or `relay` with `--metrics-port`',
    auth: 'none (loopback unless `--metrics-host`)',
    statuses: {
      200: "Prometheus's text exposition format",
      404: 'any other method or path',
      500: 'the metrics could not be collected',
    },
    description: 'Prometheus metrics of the worker or the relay.',
  },
];
