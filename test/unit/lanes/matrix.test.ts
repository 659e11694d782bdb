import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMPATIBILITY_KUBERNETES_VERSION, KUBERNETES_VERSION } from '../../lanes.ts';
import { writeCompatibilityMatrix } from '../../matrix.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-matrix-'));
const report = (name: string, files: Array<[string, Array<[string, string]>]>) => {
  const path = join(dir, `${name}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      testResults: files.map(([file, tests]) => ({
        name: join(dir, file),
        assertionResults: tests.map(([title, status]) => ({ ancestorTitles: ['suite'], title, status })),
      })),
    }),
  );
  return path;
};
const ledger = (name: string, lines: object[]) => {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return path;
};

describe('the compatibility matrix', () => {
  it('says per test on which Kubernetes it ran and how it ended, per file which servers it started, and sums them', () => {
    const a = report('a', [
      [
        'test/integration/rollouts.test.ts',
        [
          ['rolls a Deployment', 'passed'],
          ['rolls a | pipe', 'failed'],
        ],
      ],
      [
        'test/integration/e2e-vault.test.ts',
        [
          ['audit file', 'passed'],
          ['later', 'skipped'],
        ],
      ],
      ['test/unit/plan/x.test.ts', [['pure', 'passed']]],
    ]);
    const c = report('c', [
      [
        'test/integration/rollouts.test.ts',
        [
          ['rolls a Deployment', 'passed'],
          ['rolls a | pipe', 'passed'],
        ],
      ],
    ]);
    const out = join(dir, 'compatibility.md');
    writeCompatibilityMatrix(
      [
        {
          lane: 'a',
          report: a,
          ledger: ledger('a', [
            { file: 'test/integration/e2e-vault.test.ts', server: 'Vault', version: '1.21.3' },
            { file: 'test/integration/e2e-vault.test.ts', server: 'OpenBao', version: '2.7.2' },
          ]),
        },
        { lane: 'c', report: c, ledger: join(dir, 'none.jsonl') },
      ],
      out,
      new Date('2026-11-27T00:00:00Z'),
      dir,
    );
    const page = readFileSync(out, 'utf8');
    expect(page).toContain(`| Kubernetes | ${KUBERNETES_VERSION} | 4 | 2 | 1 | 1 |`);
    expect(page).toContain(`| Kubernetes | ${COMPATIBILITY_KUBERNETES_VERSION} | 2 | 2 | 0 | 0 |`);
    expect(page).toContain('| Vault | 1.21.3 | 2 | 1 | 0 | 1 |');
    expect(page).toContain('| OpenBao | 2.7.2 | 2 | 1 | 0 | 1 |');
    expect(page).toContain(
      `| Test | Kubernetes ${KUBERNETES_VERSION} | Kubernetes ${COMPATIBILITY_KUBERNETES_VERSION} |`,
    );
    expect(page).toContain('| suite › rolls a \\| pipe | failed | passed |');
    expect(page).toContain('servers: OpenBao 2.7.2, Vault 1.21.3.');
    expect(page).not.toContain('test/unit/');
  });

  it('lists a file that needs no cluster under no Kubernetes version, whichever lane ran it', () => {
    const c = report('c-free', [
      ['test/integration/vault-server.test.ts', [['runs', 'passed']]],
      ['test/integration/status.test.ts', [['reports', 'passed']]],
    ]);
    const out = join(dir, 'compatibility-free.md');
    writeCompatibilityMatrix(
      [
        {
          lane: 'c',
          report: c,
          ledger: ledger('c-free', [
            { file: 'test/integration/vault-server.test.ts', server: 'Vault', version: '1.21.1' },
          ]),
        },
      ],
      out,
      new Date('2026-11-27T00:00:00Z'),
      dir,
    );
    const page = readFileSync(out, 'utf8');
    expect(page).toContain(`| Kubernetes | ${COMPATIBILITY_KUBERNETES_VERSION} | 1 | 1 | 0 | 0 |`);
    expect(page).toContain('| Vault | 1.21.1 | 1 | 1 | 0 | 0 |');
    expect(page).toContain('no cluster; servers: Vault 1.21.1.');
    expect(page).toContain('| Test | no cluster |');
  });
});
