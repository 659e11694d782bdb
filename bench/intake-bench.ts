/**
 * Intake through `serve` over HTTP: 1,000-entry NDJSON bodies of audit entries, mostly reads as on a busy Vault
 * (99 % reads, 1 % writes to paths no route matches, so nothing is queued), POSTed to /v1/vault/audit over a
 * keep-alive connection — entries per second beside a loop that only JSON.parses the same lines, interleaved.
 *
 * And OpenBao's http audit device: the latency it adds to every request. Two OpenBao dev servers (built from the Go
 * module, like the e2e benchmark), both with a file audit device, one also with the http device posting to `serve`;
 * the same KV v2 reads on both, interleaved; p50 and p99 of each.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BEARER_TOKEN } from '../test/secrets.ts';
import { startServe } from '../test/vault/e2e-stack.ts';
import { startDevServer } from '../test/vault/server.ts';
import { median, percentile, round, type Figure } from './figures.ts';
import { size } from './size.ts';

const ENTRIES = 1_000;
const ROUNDS = size(7, 1);
const REQUESTS_PER_ROUND = size(10, 2);
/** The goal: intake over HTTP at least half as fast as JSON.parse alone; the http device adds <= 1 ms at p50. */
const INTAKE_GOAL = 0.5;
const DEVICE_GOAL_MS = 1;
const READS = size(300, 10);

const ROUTES =
  'clusters:\n  a: { kubeconfig: { env: BENCH_UNUSED_KUBECONFIG } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: app\n    match: { path: "secret/apps/{app}/db" }\n    targets: [{ clusters: [a], namespace: apps, names: ["*"], kind: Deployment, name: "{app}" }]\n';

/** One audit entry as Vault's file or http device writes it: a request or a response, a KV v2 read or write. */
function entry(i: number): string {
  const write = i % 100 === 99;
  const type = i % 2 === 0 ? 'request' : 'response';
  const path = `secret/data/unrouted/team-${i % 37}/svc-${i % 11}`;
  return JSON.stringify({
    time: '2026-11-23T22:00:00.123456789Z',
    type,
    auth: {
      client_token: 'hmac-sha256:5f0c',
      accessor: 'hmac-sha256:1a2b',
      display_name: 'kubernetes-apps',
      policies: ['default', 'apps-read'],
      token_type: 'service',
      metadata: { role: 'apps', service_account_name: 'web' },
    },
    request: {
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      operation: write ? 'update' : 'read',
      mount_type: 'kv',
      mount_point: 'secret/',
      mount_accessor: 'kv_1234',
      client_token: 'hmac-sha256:5f0c',
      namespace: { id: 'root' },
      path,
      remote_address: '10.0.12.34',
      remote_port: 40000 + (i % 1000),
    },
    ...(type === 'response'
      ? {
          response: {
            mount_type: 'kv',
            mount_point: 'secret/',
            data: write
              ? { created_time: 'hmac-sha256:02', deletion_time: 'hmac-sha256:03', destroyed: false, version: 3 }
              : { data: { password: 'hmac-sha256:9d8e' }, metadata: { version: 3 } },
          },
        }
      : {}),
  });
}

/** Sends a body encoded once beforehand: Vault's own encoding of what it sends is not the intake's work. */
function post(agent: Agent, url: URL, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${BEARER_TOKEN}`,
          'content-type': 'application/x-ndjson',
          'content-length': body.length,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function withServe<T>(run: (url: string, dir: string) => Promise<T>): Promise<T> {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-bench-intake-'));
  const routes = join(dir, 'routes.yaml');
  writeFileSync(routes, ROUTES);
  return (async () => {
    const serve = await startServe(routes);
    try {
      return await run(serve.url, dir);
    } finally {
      await serve.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  })();
}

export function intakeBench(): Promise<Figure[]> {
  return withServe(async (base) => {
    const body = Array.from({ length: ENTRIES }, (_, i) => entry(i)).join('\n');
    const url = new URL('/v1/vault/audit', base);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const bytes = Buffer.from(body);
      const status = await post(agent, url, bytes);
      if (status < 200 || status > 299) throw new Error(`serve answered ${status} to an audit batch`);
      let parsed = 0;
      const parseOnly = () => {
        for (const line of body.split('\n')) parsed += JSON.parse(line) === null ? 0 : 1;
      };
      for (let i = 0; i < 3; i++) parseOnly(); // warm-up, as the requests had one
      const viaHttp: number[] = [];
      const parseLoop: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        let started = performance.now();
        for (let r = 0; r < REQUESTS_PER_ROUND; r++) await post(agent, url, bytes);
        viaHttp.push((ENTRIES * REQUESTS_PER_ROUND) / ((performance.now() - started) / 1000));
        started = performance.now();
        for (let r = 0; r < REQUESTS_PER_ROUND; r++) parseOnly();
        parseLoop.push((ENTRIES * REQUESTS_PER_ROUND) / ((performance.now() - started) / 1000));
      }
      const ratios = viaHttp.map((v, i) => v / (parseLoop[i] ?? Number.NaN));
      const ratio = round(median(ratios));
      const note = `${ENTRIES}-entry NDJSON bodies (${round(Buffer.byteLength(body) / 1024, 0)} KB; 99% reads, 1% writes to unrouted paths), bearer auth, one keep-alive connection, serve in the benchmark's process; ${ROUNDS} rounds of ${REQUESTS_PER_ROUND} requests, each beside ${REQUESTS_PER_ROUND} JSON.parse loops`;
      return [
        {
          name: 'intake_entries_per_s',
          value: Math.round(median(viaHttp)),
          unit: 'entries/s',
          baseline: { name: 'JSON.parse of the same lines, nothing else', value: Math.round(median(parseLoop)) },
          spread: [Math.round(Math.min(...viaHttp)), Math.round(Math.max(...viaHttp))],
          runs: ROUNDS,
          note,
        },
        {
          name: 'intake_ratio_to_json_parse',
          value: ratio,
          unit: '× JSON.parse throughput',
          goal: `>= ${INTAKE_GOAL}`,
          met: ratio >= INTAKE_GOAL,
          spread: [round(Math.min(...ratios)), round(Math.max(...ratios))],
          runs: ROUNDS,
          note: `median of per-round ratios (parsed ${parsed} lines in the baseline)`,
        },
      ];
    } finally {
      agent.destroy();
    }
  });
}

export function deviceBench(): Promise<Figure[]> {
  return withServe(async (base, dir) => {
    const off = await startDevServer({ kind: 'openbao', auditFile: join(dir, 'off-audit.log') });
    const on = await startDevServer({
      kind: 'openbao',
      auditFile: join(dir, 'on-audit.log'),
      audit: [
        {
          type: 'http',
          path: 'http',
          options: {
            uri: `${base}/v1/vault/audit`,
            headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
          },
        },
      ],
    });
    try {
      // A dev server mounts secret/ as KV v2 already.
      for (const server of [off, on]) await server.client.kv2Write('secret', 'apps/web/config', { level: 'info' });
      const read = async (server: typeof on) => {
        const started = performance.now();
        await server.client.kv2Read('secret', 'apps/web/config');
        return performance.now() - started;
      };
      for (let i = 0; i < size(20, 2); i++) {
        await read(off);
        await read(on);
      }
      const msOff: number[] = [];
      const msOn: number[] = [];
      for (let i = 0; i < READS; i++) {
        // Alternate which goes first, so neither always follows the other's audit work.
        if (i % 2 === 0) {
          msOff.push(await read(off));
          msOn.push(await read(on));
        } else {
          msOn.push(await read(on));
          msOff.push(await read(off));
        }
      }
      const p50Off = round(median(msOff), 2);
      const p50On = round(median(msOn), 2);
      const added = round(p50On - p50Off, 2);
      const note = `OpenBao ${on.version} dev server, KV v2 read of one secret over loopback HTTP, ${READS} reads on each server, interleaved; both servers have a file audit device, one also the http device posting each entry (request and response) to serve with a bearer token; the device is synchronous: the read returns after serve answered`;
      return [
        {
          name: 'openbao_read_p50_ms_http_device',
          value: p50On,
          unit: 'ms',
          baseline: { name: 'the same read, no http device', value: p50Off },
          spread: [round(Math.min(...msOn), 2), round(Math.max(...msOn), 2)],
          runs: READS,
          note,
        },
        {
          name: 'openbao_read_p99_ms_http_device',
          value: round(percentile(msOn, 99), 2),
          unit: 'ms',
          baseline: { name: 'the same read, no http device', value: round(percentile(msOff, 99), 2) },
          runs: READS,
          note,
        },
        {
          name: 'openbao_http_device_added_p50_ms',
          value: added,
          unit: 'ms',
          goal: `<= ${DEVICE_GOAL_MS}`,
          met: added <= DEVICE_GOAL_MS,
          runs: READS,
          note: 'p50 with the device minus p50 without, same run',
        },
      ];
    } finally {
      await on.stop();
      await off.stop();
    }
  });
}

// `node bench/intake-bench.ts` runs both alone.
if (import.meta.filename === process.argv[1]) {
  for (const f of [...(await intakeBench()), ...(await deviceBench())]) process.stdout.write(`${JSON.stringify(f)}\n`);
}
