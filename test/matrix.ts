/**
 * The compatibility matrix, docs/compatibility.md, written by `npm test` from what the run did (test/run-suite.ts):
 * each lane's JSON report says which integration test passed or failed, the lane says on which Kubernetes version,
 * and the lane's servers ledger (test/vault/server.ts) which Vault or OpenBao server and version each file started.
 * Nothing in it is typed by hand; a run with a file filter writes its partial matrix to .local/ instead.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CLUSTER_FREE_FILES,
  COMPATIBILITY_KUBERNETES_VERSION,
  KUBERNETES_VERSION,
  serversLedger,
  type TestLane,
} from './lanes.ts';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const MATRIX_FILE = join(ROOT, 'docs', 'compatibility.md');

interface JsonReport {
  testResults: Array<{
    name: string;
    assertionResults: Array<{ ancestorTitles: string[]; title: string; status: string }>;
  }>;
}

export interface LaneRun {
  lane: Exclude<TestLane, undefined>;
  /** The lane's vitest JSON report. */
  report: string;
  /** The lane's servers ledger (default: serversLedger(lane)). */
  ledger?: string;
}

type Outcome = 'passed' | 'failed' | 'skipped';

/** The column of a file that needs no cluster (test/lanes.ts CLUSTER_FREE_FILES). */
const NO_CLUSTER = 'no cluster';
const kubernetesOf = (lane: LaneRun['lane']): string =>
  lane === 'c' ? COMPATIBILITY_KUBERNETES_VERSION : KUBERNETES_VERSION;
const outcomeOf = (status: string): Outcome =>
  status === 'passed' ? 'passed' : status === 'failed' ? 'failed' : 'skipped';
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The servers each file started, per lane: "Vault 1.21.3", "OpenBao 2.7.2". */
function serversByFile(ledger: string): Map<string, Set<string>> {
  const byFile = new Map<string, Set<string>>();
  if (!existsSync(ledger)) return byFile;
  for (const line of readFileSync(ledger, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const entry = JSON.parse(line) as { file: string; server: string; version: string };
    const set = byFile.get(entry.file) ?? new Set<string>();
    set.add(`${entry.server} ${entry.version}`);
    byFile.set(entry.file, set);
  }
  return byFile;
}

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return 'unknown';
  }
}

/** Writes docs/compatibility.md from the lanes' reports and ledgers; returns its path. */
export function writeCompatibilityMatrix(runs: LaneRun[], to = MATRIX_FILE, at = new Date(), root = ROOT): string {
  const versions = [...new Set(runs.map((r) => kubernetesOf(r.lane)))];
  /** file → test → Kubernetes version → outcome */
  const results = new Map<string, Map<string, Map<string, Outcome>>>();
  const servers = new Map<string, Set<string>>();
  /** server (or "Kubernetes vX") → counts */
  const totals = new Map<string, { passed: number; failed: number; skipped: number }>();
  const count = (key: string, outcome: Outcome) => {
    const t = totals.get(key) ?? { passed: 0, failed: 0, skipped: 0 };
    t[outcome]++;
    totals.set(key, t);
  };
  for (const run of runs) {
    if (!existsSync(run.report)) continue;
    const report = JSON.parse(readFileSync(run.report, 'utf8')) as JsonReport;
    const laneServers = serversByFile(run.ledger ?? serversLedger(run.lane));
    for (const file of report.testResults) {
      const name = relative(root, file.name);
      if (!name.startsWith('test/integration/')) continue;
      // A file that starts and reads no cluster ran on no Kubernetes, whatever its lane's clusters were.
      const kube = (CLUSTER_FREE_FILES as readonly string[]).includes(name) ? NO_CLUSTER : kubernetesOf(run.lane);
      const fileServers = laneServers.get(name) ?? new Set<string>();
      const named = servers.get(name) ?? new Set<string>();
      for (const s of fileServers) named.add(s);
      servers.set(name, named);
      const tests = results.get(name) ?? new Map<string, Map<string, Outcome>>();
      for (const a of file.assertionResults) {
        const title = [...a.ancestorTitles, a.title].join(' › ');
        const outcome = outcomeOf(a.status);
        const perVersion = tests.get(title) ?? new Map<string, Outcome>();
        perVersion.set(kube, outcome);
        tests.set(title, perVersion);
        if (kube !== NO_CLUSTER) count(`Kubernetes ${kube}`, outcome);
        for (const s of fileServers) count(s, outcome);
      }
      results.set(name, tests);
    }
  }

  const lines: string[] = [
    '# Compatibility matrix',
    '',
    `Written by \`npm test\` (test/run-suite.ts, test/matrix.ts) from its own run at commit ${commit()} on ${at.toISOString().slice(0, 10)}: do not edit.`,
    'Each integration test ran on the Kubernetes version of its lane; a file that started a Vault or OpenBao server',
    'names it with the version the server reported (`/v1/sys/health`), and every test of that file counts for it.',
    'Unit tests need no server and are not listed. What differs between the versions, and how each difference is',
    'handled: [Compatibility notes](compatibility-notes.md).',
    '',
    '| Server | Version | Tests | Passed | Failed | Skipped |',
    '|---|---|---:|---:|---:|---:|',
  ];
  for (const [key, t] of [...totals].sort(([a], [b]) => a.localeCompare(b))) {
    const [server, ...version] = key.split(' ');
    lines.push(
      `| ${server} | ${version.join(' ')} | ${t.passed + t.failed + t.skipped} | ${t.passed} | ${t.failed} | ${t.skipped} |`,
    );
  }
  for (const [file, tests] of [...results].sort(([a], [b]) => a.localeCompare(b))) {
    const ran = [...versions, NO_CLUSTER].filter((v) => [...tests.values()].some((m) => m.has(v)));
    const heading = (v: string) => (v === NO_CLUSTER ? NO_CLUSTER : `Kubernetes ${v}`);
    lines.push(
      '',
      `## ${file}`,
      '',
      `${ran.map(heading).join(', ')}; servers: ${[...(servers.get(file) ?? [])].sort().join(', ') || 'none'}.`,
      '',
    );
    lines.push(`| Test | ${ran.map(heading).join(' | ')} |`, `|---|${ran.map(() => '---').join('|')}|`);
    for (const [title, perVersion] of tests)
      lines.push(`| ${cell(title)} | ${ran.map((v) => perVersion.get(v) ?? '—').join(' | ')} |`);
  }
  writeFileSync(to, `${lines.join('\n')}\n`);
  return to;
}
