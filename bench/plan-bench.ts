/**
 * Plan cost: 10,000 routes, 1,000-entry audit batches, microseconds per entry from raw text to targets,
 * beside the floor of JSON.parse on the same lines. Then the same batches (entries for the first 100 routes)
 * planned with tables of 100, 1,000 and 10,000 routes: how the cost grows with the table alone. And peak memory
 * of planning a 10 MB NDJSON stream, in a fresh process, beside a process that only reads the same stream.
 */
import { execFileSync } from 'node:child_process';
import { hash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { parseInput } from '../lib/sources/parse.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';

const ROUTES = size(10_000, 200);
const BATCH = size(1_000, 100);
/** The goals: within 3x JSON.parse of the same lines at 10,000 routes; within 1.5x from 100 to 10,000 routes. */
const RATIO_GOAL = 3;
const FLAT_GOAL = 1.5;
const FLAT_SIZES: readonly [number, ...number[]] = size([100, 1_000, 10_000], [100, 200, 400]);

/** A routing table of `n` routes of mixed shapes, over 3 clusters. */
export function syntheticRoutes(n: number): string {
  const lines = [
    'clusters:',
    '  a: { kubeconfig: { env: A }, labels: { env: prod } }',
    '  b: { kubeconfig: { env: B }, labels: { env: prod } }',
    '  c: { kubeconfig: { env: C }, labels: { env: dev } }',
    'vault:',
    '  mounts: { secret: 2 }',
    'routes:',
  ];
  for (let i = 0; i < n; i++) {
    const shape = i % 4;
    const path =
      shape === 0
        ? `secret/team-${i}/app/db`
        : shape === 1
          ? `secret/team-${i}/{app}/**`
          : shape === 2
            ? `secret/team-${i}/*/tls`
            : `secret/team-${i}/svc-{app}`;
    const name = shape === 1 || shape === 3 ? 'names: [api, web, "app-*"], name: "{app}"' : `name: app-${i}`;
    lines.push(
      `  - name: r${i}`,
      `    match: { path: "${path}" }`,
      `    targets: [{ clusters: { env: prod }, namespace: ns-${i % 50}, kind: Deployment, ${name} }]`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** An audit response line for a KV v2 write that matches route `i`. */
export function auditLine(i: number, version: number): string {
  const shape = i % 4;
  const key =
    shape === 0
      ? `team-${i}/app/db`
      : shape === 1
        ? `team-${i}/api/db/password`
        : shape === 2
          ? `team-${i}/edge/tls`
          : `team-${i}/svc-web`;
  return JSON.stringify({
    time: '2026-11-20T10:00:00.123456789Z',
    type: 'response',
    auth: {
      client_token: 'hmac-sha256:00',
      accessor: 'hmac-sha256:01',
      display_name: 'approle',
      policies: ['rotator'],
      token_type: 'service',
    },
    request: {
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      namespace: { id: 'root' },
      path: `secret/data/${key}`,
      remote_address: '127.0.0.1',
    },
    response: {
      mount_type: 'kv',
      data: { created_time: 'hmac-sha256:02', deletion_time: 'hmac-sha256:03', destroyed: false, version },
    },
  });
}

export async function planBench(): Promise<Figure[]> {
  const table = loadRoutingTable(syntheticRoutes(ROUTES), 'synthetic.yaml');
  const batches = Array.from({ length: 5 }, (_, b) =>
    Array.from({ length: BATCH }, (_, k) => auditLine((k * 7919 + b * 104729) % ROUTES, b + 1)).join('\n'),
  );
  const plan = (text: string) => planRollouts(table, parseInput(text, { mounts: table.mounts }).changes).targets.length;
  const floor = (text: string) => text.split('\n').reduce((n, l) => n + (JSON.parse(l) ? 1 : 0), 0);
  // The least planner, reading lines on trust; then the same behind the trust boundary every input goes through.
  const least = leastPlanner(table, batches, trustedLines);
  const leastParsed = leastPlanner(table, batches, (text) => parseInput(text, { mounts: table.mounts }).changes);

  // warm up the JIT
  for (let i = 0; i < size(3, 1); i++) {
    for (const b of batches) {
      plan(b);
      floor(b);
    }
  }
  const ours: number[] = [];
  const base: number[] = [];
  const leastUs: number[] = [];
  const leastParsedUs: number[] = [];
  for (let rep = 0; rep < size(15, 1); rep++) {
    for (const b of batches) {
      let t = process.hrtime.bigint();
      const targets = plan(b);
      ours.push(Number(process.hrtime.bigint() - t) / 1e3 / BATCH);
      if (targets < BATCH) throw new Error(`expected every entry to plan a target, got ${targets}`);
      t = process.hrtime.bigint();
      floor(b);
      base.push(Number(process.hrtime.bigint() - t) / 1e3 / BATCH);
      t = process.hrtime.bigint();
      const leastTargets = least(b);
      leastUs.push(Number(process.hrtime.bigint() - t) / 1e3 / BATCH);
      t = process.hrtime.bigint();
      const parsedTargets = leastParsed(b);
      leastParsedUs.push(Number(process.hrtime.bigint() - t) / 1e3 / BATCH);
      if (leastTargets !== targets || parsedTargets !== targets)
        throw new Error(`the least planners made ${leastTargets} and ${parsedTargets} targets, ours ${targets}`);
    }
  }
  const value = round(median(ours));
  const ratios = ours.map((v, i) => v / (base[i] ?? Number.NaN));
  const ratio = round(median(ratios));
  const figures: Figure[] = [
    {
      name: 'plan_us_per_entry',
      value,
      unit: 'µs/entry',
      baseline: { name: 'JSON.parse of the same lines', value: round(median(base)) },
      spread: [round(Math.min(...ours)), round(Math.max(...ours))],
      runs: ours.length,
      note: `${ROUTES} routes, ${BATCH}-entry audit batches, parse + route + plan`,
    },
    {
      name: 'plan_ratio_to_json_parse',
      value: ratio,
      unit: '× JSON.parse',
      goal: `<= ${RATIO_GOAL}`,
      met: ratio <= RATIO_GOAL,
      spread: [round(Math.min(...ratios)), round(Math.max(...ratios))],
      runs: ratios.length,
      note: `median of the per-batch ratios, each batch planned then JSON.parsed back to back; ${ROUTES} routes`,
    },
  ];
  const versus = (name: string, us: number[], note: string, floorGoal: boolean): Figure[] => {
    const r = round(median(us.map((v, i) => v / (base[i] ?? Number.NaN))));
    return [
      {
        name: `${name}_us_per_entry`,
        value: round(median(us)),
        unit: 'µs/entry',
        baseline: { name: 'JSON.parse of the same lines', value: round(median(base)) },
        spread: [round(Math.min(...us)), round(Math.max(...us))],
        runs: us.length,
        note,
      },
      {
        name: `${name}_ratio_to_json_parse`,
        value: r,
        unit: '× JSON.parse',
        ...(floorGoal ? { goal: `<= ${RATIO_GOAL} (the plan's goal)`, met: r <= RATIO_GOAL } : {}),
        runs: us.length,
        note: `median of the per-batch ratios; ours is ${round(ratio / r)}× this`,
      },
    ];
  };
  figures.push(
    ...versus(
      'plan_least',
      leastUs,
      'the least planning: JSON.parse each line, one Map lookup of its path (no patterns, no checks), then the ' +
        'same targets built, keyed, gathered, hashed and sorted; measured after ours on the same batches',
      false,
    ),
    ...versus(
      'plan_floor',
      leastParsedUs,
      'the least planner behind the trust boundary: each line parsed into a SecretChange as every input is ' +
        '(lib/sources/parse.ts), then the Map lookup and the same targets as plan_least_us_per_entry',
      true,
    ),
  );
  figures.push(...flatness());
  figures.push(...peakMemory(table.routes.length));
  return figures;
}

interface LeastSecret {
  path: string;
  version: number | null;
  time: string;
}

/** The least reading of an audit line: JSON.parse, and the path and version taken on trust. */
function* trustedLines(text: string): Generator<LeastSecret> {
  for (const line of text.split('\n')) {
    const entry = JSON.parse(line) as {
      time: string;
      request: { path: string };
      response: { data: { version: number } };
    };
    yield { path: entry.request.path.replace('/data/', '/'), version: entry.response.data.version, time: entry.time };
  }
}

/**
 * The least work a planner does for these batches, to put the plan's ratio beside: what each path plans is looked up
 * whole in a Map (made from our own plan of the same batches, so no pattern is matched and nothing is checked), and
 * only what every plan must do per entry and target is left: parse the line, build each target, key it, gather the
 * routes and secrets of a target named twice, hash its restart token and sort the keys.
 */
function leastPlanner(
  table: ReturnType<typeof loadRoutingTable>,
  batches: readonly string[],
  read: (text: string) => Iterable<LeastSecret>,
): (text: string) => number {
  type Made = { cluster: string; namespace: string; kind: string; name?: string; route: string };
  const byPath = new Map<string, Made[]>();
  for (const b of batches) {
    for (const t of planRollouts(table, parseInput(b, { mounts: table.mounts }).changes).targets) {
      if (t.type !== 'workload') throw new Error('the synthetic table names workloads only');
      for (const [i, path] of t.paths.entries()) {
        const made = byPath.get(path) ?? [];
        const one = {
          cluster: t.cluster,
          namespace: t.namespace,
          kind: t.kind,
          name: t.name,
          route: t.routes[i] ?? '',
        };
        if (!made.some((m) => JSON.stringify(m) === JSON.stringify(one))) made.push(one);
        byPath.set(path, made);
      }
    }
  }
  return (text) => {
    type Acc = { made: Made; routes: string[]; secrets: LeastSecret[] };
    const byKey = new Map<string, Acc>();
    for (const secret of read(text)) {
      const path = secret.path;
      for (const made of byPath.get(path) ?? []) {
        const key = `${made.cluster}\u0000${made.namespace}\u0000${made.kind}/name=${made.name ?? ''}`;
        const acc = byKey.get(key);
        if (!acc) byKey.set(key, { made, routes: [made.route], secrets: [secret] });
        else {
          if (!acc.routes.includes(made.route)) acc.routes.push(made.route);
          acc.secrets.push(secret);
        }
      }
    }
    const tokens = new Map<string, string>();
    const targets = [...byKey.keys()].sort().map((key) => {
      const { made, routes, secrets } = byKey.get(key) as Acc;
      const part = secrets.map((s) => `${s.path}@${s.version}`).join('\n');
      let restartToken = tokens.get(part);
      if (restartToken === undefined) tokens.set(part, (restartToken = hash('sha256', part, 'hex').slice(0, 32)));
      const { route: _, ...target } = made;
      return { ...target, routes, paths: secrets.map((s) => s.path), secrets, restartToken };
    });
    return targets.length;
  };
}

/** The same 1,000-entry batches (routes 0-99) planned with 100, 1,000 and 10,000 routes in the table, interleaved. */
function flatness(): Figure[] {
  const tables = FLAT_SIZES.map((n) => loadRoutingTable(syntheticRoutes(n), 'synthetic.yaml'));
  const batches = Array.from({ length: 5 }, (_, b) =>
    Array.from({ length: BATCH }, (_, k) => auditLine((k * 7 + b * 13) % FLAT_SIZES[0], b + 1)).join('\n'),
  );
  const us = FLAT_SIZES.map(() => [] as number[]);
  for (let rep = 0; rep < size(18, 4); rep++) {
    for (const b of batches) {
      tables.forEach((table, t) => {
        const started = process.hrtime.bigint();
        planRollouts(table, parseInput(b, { mounts: table.mounts }).changes);
        if (rep >= 3) us[t]?.push(Number(process.hrtime.bigint() - started) / 1e3 / BATCH); // 3 warm-up rounds
      });
    }
  }
  const medians = us.map((xs) => median(xs));
  const small = medians[0] ?? Number.NaN;
  const figures: Figure[] = FLAT_SIZES.map((n, t) => ({
    name: `plan_us_per_entry_${n}_routes`,
    value: round(medians[t] ?? Number.NaN),
    unit: 'µs/entry',
    ...(t > 0 ? { baseline: { name: `the same batches with ${FLAT_SIZES[0]} routes`, value: round(small) } } : {}),
    spread: [round(Math.min(...(us[t] ?? []))), round(Math.max(...(us[t] ?? [])))],
    runs: us[t]?.length ?? 0,
    note: `${BATCH}-entry batches for routes 0-${FLAT_SIZES[0] - 1}, the table holding ${n} routes; tables interleaved per batch`,
  }));
  const flat = round((medians.at(-1) ?? Number.NaN) / small);
  figures.push({
    name: 'plan_flatness_10000_vs_100_routes',
    value: flat,
    unit: '×',
    goal: `<= ${FLAT_GOAL}`,
    met: flat <= FLAT_GOAL,
    runs: us[0]?.length ?? 0,
    note: 'µs/entry with 10,000 routes / with 100 routes, same batches',
  });
  return figures;
}

/** Peak RSS of planning a 10 MB NDJSON file in a fresh process, beside a process that only streams it. */
function peakMemory(routes: number): Figure[] {
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-bench-'));
  try {
    const input = join(dir, 'audit.ndjson');
    const lines: string[] = [];
    let bytes = 0;
    for (let i = 0; bytes < size(10 * 1024 * 1024, 200 * 1024); i++) {
      const line = `${auditLine(i % routes, 1 + Math.floor(i / routes))}\n`;
      bytes += line.length;
      lines.push(line);
    }
    writeFileSync(input, lines.join(''));
    const script = new URL('./plan-memory-child.ts', import.meta.url).pathname;
    const run = (mode: string) => {
      const peaks: number[] = [];
      for (let i = 0; i < size(3, 1); i++)
        peaks.push(
          Number(execFileSync(process.execPath, [script, mode, input, String(routes)], { encoding: 'utf8' }).trim()),
        );
      return peaks;
    };
    const ours = run('plan');
    const base = run('read');
    const value = round(median(ours), 1);
    return [
      {
        name: 'plan_peak_mb',
        value,
        unit: 'MB peak RSS',
        goal: 'bounded: streamed, not the input held in memory',
        baseline: { name: 'a process that only streams the same file', value: round(median(base), 1) },
        spread: [round(Math.min(...ours), 1), round(Math.max(...ours), 1)],
        runs: ours.length,
        note: `${round(bytes / 1024 / 1024, 1)} MB NDJSON, ${routes} routes`,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
