import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importCommand } from '../../../lib/cli/import-command.ts';
import { memoryIo } from '../../helpers.ts';

describe('vault-rollout import: arguments', () => {
  it.each([
    [[], 'give at least one --cluster NAME=KUBECONFIG'],
    [['--cluster', 'Alpha=k'], '--cluster Alpha=k: must be NAME=KUBECONFIG with a lowercase name'],
    [['--cluster', 'alpha'], 'must be NAME=KUBECONFIG'],
    [['--cluster', 'a=k', '--cluster', 'a=l'], 'a cluster name is given twice'],
    [
      ['--cluster', 'a=k', '--label', 'b:env=prod'],
      '--label b:env=prod: must be CLUSTER:KEY=VALUE for a cluster given with --cluster',
    ],
    [['--cluster', 'a=k', '--from', 'vso,helm'], '--from takes vso, eso, reloader (comma-separated), not helm'],
    [['--cluster', 'a=k', '--namespace', 'Bad_NS'], '--namespace Bad_NS: not a namespace name'],
    [
      ['--cluster', 'a=k', '--vso-operator-namespace', 'vso/../x'],
      '--vso-operator-namespace vso/../x: not a namespace name',
    ],
    [['--cluster', 'a=k', '--bogus'], 'unknown option "--bogus"'],
  ])('%j exits 64: %s', async (argv, message) => {
    const io = memoryIo();
    expect(await importCommand(argv, io, '/work')).toBe(64);
    expect(io.err).toContain(message);
  });

  it('writes nothing when a cluster cannot be read, and names it (never the kubeconfig content)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-import-unit-'));
    const io = memoryIo();
    expect(await importCommand(['--cluster', 'alpha=missing.kubeconfig', '--file', 'routes.yaml'], io, dir)).toBe(1);
    expect(io.err).toMatch(/^vault-rollout import: cannot read cluster alpha: /);
    expect(existsSync(join(dir, 'routes.yaml'))).toBe(false);
  });
});
