/**
 * The last step of `npm test`: every test, in three lanes at once (test/lanes.ts).
 *
 * Most of the integration files' time is waiting — on kwok pods turning Ready, on visibility timeouts, on `serve`
 * being killed and started a hundred times — not computing, so two vitest processes on two sets of test clusters
 * finish in a little more than half the time of one (CONTRIBUTING.md "Test clusters" has the figures). Lane a runs most
 * integration files on the clusters under .local/; lane b runs the slowest files on clusters of
 * its own (.local/lane-b/, ports VAULT_ROLLOUT_CLUSTERS_PORT_BASE + 100); lane c, the compatibility lane, runs
 * the rollout, admission, dry-run, status and cluster files again on the oldest Kubernetes EKS supports
 * (.local/lane-c/, ports + 200), then the unit project. Lanes a and b run the newest Kubernetes (test/lanes.ts).
 *
 * Before the lanes start, this builds (or finds in ~/.cache/vault-rollout) every component once, so the two never
 * build the same thing at the same time. Each lane writes a blob report with its coverage; vitest's --merge-reports
 * then writes the one JSON report .ci/run reads (.local/vitest-report.json) and checks the coverage thresholds over
 * every lane together; the lanes' own JSON reports and the servers each file started give the compatibility matrix,
 * docs/compatibility.md (test/matrix.ts). Exit status: non-zero when a lane, or the merge, failed.
 *
 * Arguments after `--` go to every lane's vitest (a file filter, say; its partial matrix goes to .local/);
 * `VAULT_ROLLOUT_TEST_LANES=a` runs lane a alone with every integration file (one process, as before the lanes),
 * `a,b` leaves out the compatibility lane.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBinaries } from './clusters/clusters.ts';
import { prepareComponents } from './components.ts';
import { COMPATIBILITY_KUBERNETES_VERSION, KUBERNETES_VERSION, serversLedger } from './lanes.ts';
import { MATRIX_FILE, writeCompatibilityMatrix } from './matrix.ts';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const VITEST = join(ROOT, 'node_modules', '.bin', 'vitest');
const BLOB_DIR = join(ROOT, '.local', 'blob-reports');
const REPORT = join(ROOT, '.local', 'vitest-report.json');
/** Lane b's and c's clusters sit this far above lane a's ports, in turn (a set of three clusters uses base .. base+29). */
const LANE_PORT_STEP = 100;

interface Lane {
  name: 'a' | 'b' | 'c';
  args: string[];
  env: NodeJS.ProcessEnv;
}

/** Runs a command with its output prefixed by the lane's name, line by line; resolves with its exit code. */
function run(label: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolveExit, reject) => {
    const child = spawn(process.execPath, [VITEST, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const prefix = label === '' ? '' : `${label}│ `;
    for (const [from, to] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const) {
      let pending = '';
      from.setEncoding('utf8');
      from.on('data', (chunk: string) => {
        const lines = (pending + chunk).split('\n');
        pending = lines.pop() ?? '';
        if (lines.length > 0) to.write(lines.map((l) => prefix + l).join('\n') + '\n');
      });
      from.on('end', () => {
        if (pending !== '') to.write(prefix + pending + '\n');
      });
    }
    child.once('error', reject);
    child.once('close', (code, signal) => resolveExit(code ?? (signal ? 128 : 1)));
  });
}

async function main(): Promise<number> {
  const passThrough = process.argv.slice(2).filter((a) => a !== '--');
  const only = process.env.VAULT_ROLLOUT_TEST_LANES ?? 'a,b,c';
  const names = only.split(',');
  if (!names.includes('a') || names.some((n) => n !== 'a' && n !== 'b' && n !== 'c'))
    throw new Error(
      `VAULT_ROLLOUT_TEST_LANES=${only}: expected lane a and any of b and c, such as a,b,c (the default), a,b or a (every integration file in one process)`,
    );
  if (names.includes('c') && !names.includes('b'))
    throw new Error("lane c needs lane b beside it (lane a then leaves out lane b's files)");
  const base = Number(process.env.VAULT_ROLLOUT_CLUSTERS_PORT_BASE ?? '16440');
  if (!Number.isInteger(base) || base < 1024 || base + 2 * LANE_PORT_STEP > 65000) {
    throw new Error(
      `VAULT_ROLLOUT_CLUSTERS_PORT_BASE=${process.env.VAULT_ROLLOUT_CLUSTERS_PORT_BASE}: expected a port between 1024 and ${65000 - 2 * LANE_PORT_STEP}`,
    );
  }

  const t0 = Date.now();
  // Side by side: each build spends part of its time fetching modules (the network), the other compiling (the cores);
  // one after the other, a cold run waited for both in full. Separate caches, locks and links, so neither disturbs
  // the other.
  // Both end before a failure is reported, so no build is left running behind the exit.
  const built = await Promise.allSettled([
    buildBinaries((line) => process.stderr.write(`[clusters] ${line}\n`)),
    prepareComponents(),
  ]);
  for (const result of built) if (result.status === 'rejected') throw result.reason;
  process.stderr.write(`[run-suite] components ready in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);

  rmSync(BLOB_DIR, { recursive: true, force: true });
  mkdirSync(BLOB_DIR, { recursive: true });
  const laneReport = (name: string) => join(ROOT, '.local', `lane-${name}-report.json`);
  // Each lane's coverage goes into its blob; its own thresholds are off (a lane covers only part), the merge checks them.
  const laneArgs = (name: string) => [
    'run',
    ...(passThrough.length > 0 ? ['--passWithNoTests'] : []),
    '--coverage',
    `--coverage.reportsDirectory=${join(ROOT, '.local', `coverage-lane-${name}`)}`,
    '--coverage.thresholds.lines=0',
    '--reporter=default',
    '--reporter=blob',
    `--outputFile.blob=${join(BLOB_DIR, `lane-${name}.blob`)}`,
    '--reporter=json',
    `--outputFile.json=${laneReport(name)}`,
  ];
  for (const name of ['a', 'b', 'c'] as const) {
    rmSync(laneReport(name), { force: true });
    rmSync(serversLedger(name), { force: true });
  }
  // Lane a alone runs every integration file (VAULT_ROLLOUT_TEST_LANE unset); with b, all but b's.
  const alone = names.length === 1;
  // The unit project goes to the lane that finishes first: vitest runs it after the integration files of its process,
  // and lane c's few files end long before the others.
  const unitLane = names.includes('c') ? 'c' : names.includes('b') ? 'b' : 'a';
  const projects = (name: Lane['name']) => [
    '--project',
    'integration',
    ...(unitLane === name ? ['--project', 'unit'] : []),
  ];
  // Lane b's and c's clusters sit one and two LANE_PORT_STEPs above lane a's.
  const lanes: Lane[] = (['a', 'b', 'c'] as const)
    .filter((name) => names.includes(name))
    .map((name, step) => ({
      name,
      args: [...laneArgs(name), ...projects(name), ...passThrough],
      env: {
        ...process.env,
        VAULT_ROLLOUT_TEST_LANE: alone ? '' : name,
        VAULT_ROLLOUT_TEST_LANES: names.join(','),
        ...(step > 0 ? { VAULT_ROLLOUT_CLUSTERS_PORT_BASE: String(base + step * LANE_PORT_STEP) } : {}),
      },
    }));
  process.stderr.write(
    `[run-suite] lanes ${lanes.map((l) => l.name).join(', ')}: Kubernetes ${KUBERNETES_VERSION}${names.includes('c') ? ` (lane c: ${COMPATIBILITY_KUBERNETES_VERSION})` : ''}\n`,
  );
  const codes = await Promise.all(lanes.map((lane) => run(alone ? '' : lane.name, lane.args, lane.env)));
  lanes.forEach((lane, i) => process.stderr.write(`[run-suite] lane ${lane.name}: exit ${codes[i]}\n`));
  // A filtered run's matrix is partial: it goes to .local/, never over the page in docs/.
  const matrix = writeCompatibilityMatrix(
    lanes.map((l) => ({ lane: l.name, report: laneReport(l.name) })),
    passThrough.length === 0 ? MATRIX_FILE : join(ROOT, '.local', 'compatibility.md'),
  );
  process.stderr.write(`[run-suite] compatibility matrix ${matrix}\n`);

  // One report and one coverage check over both lanes; its summary is the run's last word.
  const merged = await run(
    '',
    ['--merge-reports', BLOB_DIR, '--coverage', '--reporter=default', '--reporter=json', `--outputFile.json=${REPORT}`],
    process.env,
  );
  process.stderr.write(
    `[run-suite] merged report ${REPORT}: exit ${merged}; ${((Date.now() - t0) / 1000).toFixed(0)}s in all\n`,
  );
  return codes.every((c) => c === 0) && merged === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`[run-suite] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
