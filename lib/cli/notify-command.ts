/**
 * `vault-rollout notify test --routes FILE [--json]`: sends one sample event to each sink the routing table names
 * (top level and routes), with the secrets from this environment, and reports per sink: sent, failed (the status
 * or error kind) or not usable (a missing variable, a non-https URL). Never prints a URL or a secret. Exit 0 when
 * every sink took the sample, 1 otherwise.
 */
import { rotationEvent, type NotificationEvent } from '../notify/event.ts';
import { resolveSinks, type Sink } from '../notify/sinks.ts';
import { printable } from '../report/printable.ts';
import { table as renderTable } from '../report/table.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { printData } from './output.ts';
import { parseCommand } from './spec.ts';
import { notify as spec } from './specs.ts';

export async function notifyCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined) return usageError(io, 'notify', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  if (table.allSinks.size === 0) {
    io.stderr(`vault-rollout notify: ${values.routes} configures no notification sink (notifications.sinks)\n`);
    return EXIT.failure;
  }
  const { sinks, problems } = resolveSinks(table.allSinks, { env: io.env });
  const now = new Date().toISOString();
  const sample = rotationEvent({
    kind: 'complete',
    rotation: `test-${Date.now().toString(16)}`,
    route: 'notify-test',
    at: now,
    secrets: ['secret/vault-rollout/notify-test version 1'],
    reason: 'a test notification from vault-rollout notify test: nothing was restarted',
    clusters: [],
  });
  const results: SinkResult[] = [];
  for (const [name, problem] of problems)
    results.push({ sink: name, type: table.allSinks.get(name)?.type ?? '?', outcome: 'not usable', detail: problem });
  results.push(...(await sendSample([...sinks.values()], sample)));
  results.sort((a, b) => a.sink.localeCompare(b.sink));
  printData(
    io,
    values.output,
    () => ({ event: sample.id, sinks: results }),
    () =>
      `${renderTable(
        ['SINK', 'TYPE', 'OUTCOME', 'MS', 'DETAIL'],
        results.map((r) =>
          [r.sink, r.type, r.outcome, r.ms === undefined ? '' : String(r.ms), r.detail].map(printable),
        ),
      )}\n`,
  );
  return results.every((r) => r.outcome === 'sent') ? EXIT.ok : EXIT.failure;
}

/** One sink's outcome: sent, failed (the status or error kind) or not usable (why), and how long the send took. */
interface SinkResult {
  sink: string;
  type: string;
  outcome: 'sent' | 'failed' | 'not usable';
  detail: string;
  ms?: number;
}

/** Sends the sample to every usable sink at once; the results in the order the sends end. */
async function sendSample(sinks: readonly Sink[], sample: NotificationEvent): Promise<SinkResult[]> {
  const results: SinkResult[] = [];
  await Promise.all(
    sinks.map(async (sink) => {
      const started = Date.now();
      try {
        await sink.send(sample);
        results.push({ sink: sink.name, type: sink.type, outcome: 'sent', detail: '', ms: Date.now() - started });
      } catch (e) {
        results.push({
          sink: sink.name,
          type: sink.type,
          outcome: 'failed',
          detail: e instanceof Error && e.name === 'SinkError' ? e.message : e instanceof Error ? e.name : 'error',
          ms: Date.now() - started,
        });
      }
    }),
  );
  return results;
}
