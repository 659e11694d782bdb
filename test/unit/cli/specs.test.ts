/**
 * The command specs are the one source of parsing, help, completions and the reference: each of those shows every
 * flag, the specs agree with the constants they copy (specs.ts imports nothing heavy), and the table's colours and
 * the wait indicator behave.
 */
import { describe, expect, it, vi } from 'vitest';
import { IMPORT_SOURCES } from '../../../lib/importer/import-routes.ts';
import { VSO_OPERATOR_NAMESPACE } from '../../../lib/importer/import-sources.ts';
import { colourOn, printData, waitIndicator } from '../../../lib/cli/output.ts';
import { bashCompletion, fishCompletion, zshCompletion } from '../../../lib/cli/completion.ts';
import { main } from '../../../lib/cli/main.ts';
import { CLI_SPECS, cliReferenceMarkdown } from '../../../lib/cli/reference.ts';
import { EXAMPLES, exampleLine } from '../../../lib/cli/examples.ts';
import { allOptions, formatDuration, parseCliDuration, parseCommand } from '../../../lib/cli/spec.ts';
import { importSpec, plan } from '../../../lib/cli/specs.ts';
import { serve } from '../../../lib/cli/service-specs.ts';
import { MAX_LOOPS } from '../../../lib/runtime/local-worker.ts';
import { DEFAULT_MAX_CONNECTIONS } from '../../../lib/cli/serve-command.ts';
import { InputFormats } from '../../../lib/sources/parse.ts';
import { memoryIo } from '../../helpers.ts';

describe('the specs', () => {
  it('agree with the constants they copy', () => {
    expect(plan.options.find((o) => o.name === 'format')?.choices).toEqual(InputFormats);
    expect(serve.options.find((o) => o.name === 'loops')?.max).toBe(MAX_LOOPS);
    expect(serve.options.find((o) => o.name === 'max-connections')?.default).toBe(DEFAULT_MAX_CONNECTIONS);
    expect(importSpec.options.find((o) => o.name === 'from')?.default).toEqual(IMPORT_SOURCES);
    expect(importSpec.options.find((o) => o.name === 'vso-operator-namespace')?.default).toBe(VSO_OPERATOR_NAMESPACE);
  });

  it('give every integer and duration flag its bounds', () => {
    for (const spec of CLI_SPECS)
      for (const o of allOptions(spec))
        if (o.type === 'integer' || o.type === 'duration')
          expect([spec.name, o.name, o.min !== undefined && o.max !== undefined]).toEqual([spec.name, o.name, true]);
  });

  it('say -n and --namespace only of a Kubernetes namespace', () => {
    for (const spec of CLI_SPECS)
      for (const o of allOptions(spec))
        if (o.name === 'namespace' || o.short === 'n') expect(o.summary).toMatch(/Kubernetes namespace/);
  });

  it("every command's --help shows each of its flags and exits 0", async () => {
    for (const spec of CLI_SPECS) {
      const io = memoryIo();
      expect(await main(['help', spec.name], io)).toBe(0);
      for (const o of allOptions(spec)) expect(io.out, `${spec.name} --${o.name}`).toContain(`--${o.name}`);
    }
  });
});

describe('the reference and the completions', () => {
  const reference = cliReferenceMarkdown();
  it.each(CLI_SPECS.map((s) => [s.name, s] as const))(
    '%s: the reference and each shell complete every flag',
    (name, spec) => {
      expect(reference).toContain(`## ${name}\n`);
      const section = reference.slice(reference.indexOf(`## ${name}\n`)).split('\n## ')[0] as string;
      for (const o of allOptions(spec)) {
        expect(section, `--${o.name}`).toContain(`--${o.name}`);
        if (o.env) expect(section).toContain(`\`${o.env}\``);
      }
      for (const [code] of spec.exits) expect(section).toContain(`- ${code}: `);
      for (const script of [bashCompletion(), zshCompletion(), fishCompletion()]) {
        expect(script).toContain(name);
        for (const o of allOptions(spec)) expect(script).toMatch(new RegExp(`--${o.name}\\b|-l ${o.name}\\b`));
      }
    },
  );

  it.each(['bash', 'zsh', 'fish'])('vault-rollout completion %s prints its script', async (shell) => {
    const io = memoryIo();
    expect(await main(['completion', shell], io)).toBe(0);
    expect(io.out).toContain('vault-rollout');
    expect(await main(['completion', 'tcsh'], memoryIo())).toBe(64);
  });
});

describe('durations', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['1m30s', 90_000],
    ['1h2m3s', 3_723_000],
  ])('%s is %i ms', (text, ms) => {
    expect(parseCliDuration(text)).toBe(ms);
    expect(parseCliDuration(formatDuration(ms))).toBe(ms);
  });

  it.each([
    ['30', 'use a unit: 30s'],
    ['1.5', 'use a unit: 1.5s'],
    ['10 s', 'a duration such as'],
    ['', 'a duration such as'],
    ['1d', 'a duration such as'],
  ])('%j is refused: %s', (text, message) => {
    expect(() => parseCliDuration(text)).toThrow(message);
  });
});

describe('colour', () => {
  const table = 'web  FAILED\napi  BEHIND\n';
  it.each([
    [{ stdoutIsTTY: true }, {}, true],
    [{ stdoutIsTTY: false }, {}, false],
    [{ stdoutIsTTY: true }, { NO_COLOR: '1' }, false],
    [{ stdoutIsTTY: true }, { NO_COLOR: '' }, true],
    [{ stdoutIsTTY: true }, { TERM: 'dumb' }, false],
  ])('%j with %j: coloured %s', (tty, env, coloured) => {
    const io = { ...memoryIo({}, env), ...tty };
    let out = '';
    io.stdout = (t: string) => void (out += t);
    expect(colourOn(io)).toBe(coloured);
    printData(
      io,
      'table',
      () => ({}),
      () => table,
    );
    expect(out.includes('\x1b[31mFAILED\x1b[0m')).toBe(coloured);
    expect(out.includes('\x1b[33mBEHIND\x1b[0m')).toBe(coloured);
  });

  it.each(['json', 'yaml'])('never in %s', (output) => {
    const io = { ...memoryIo(), stdoutIsTTY: true };
    let out = '';
    io.stdout = (t: string) => void (out += t);
    printData(
      io,
      output,
      () => ({ state: 'FAILED' }),
      () => table,
    );
    expect(out).toContain('FAILED');
    expect(out).not.toContain('\x1b[');
  });
});

describe('the wait indicator', () => {
  it("draws on a terminal's stderr and leaves no timer when stopped", () => {
    vi.useFakeTimers();
    try {
      const io = { ...memoryIo(), stderrIsTTY: true };
      let err = '';
      io.stderr = (t: string) => void (err += t);
      const indicator = waitIndicator(io, false, 'reading 3 clusters');
      vi.advanceTimersByTime(350);
      indicator.stop();
      expect(err).toContain('reading 3 clusters');
      expect(err.endsWith('\r\x1b[K')).toBe(true);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it.each([
    [false, false],
    [true, true],
  ])('is silent off a terminal (%s) or with --quiet (%s)', (tty, quiet) => {
    const io = { ...memoryIo(), stderrIsTTY: tty };
    let err = '';
    io.stderr = (t: string) => void (err += t);
    waitIndicator(io, quiet, 'x').stop();
    expect(err).toBe('');
  });
});

describe('--quiet and --verbose', () => {
  it('every command takes them', async () => {
    for (const spec of CLI_SPECS)
      for (const flag of ['--quiet', '-q', '--verbose', '-v'])
        expect(
          allOptions(spec).some((o) => `--${o.name}` === flag || `-${o.short}` === flag),
          `${spec.name} ${flag}`,
        ).toBe(true);
  });

  it('--verbose adds debug lines; --quiet drops the hint and information', async () => {
    const routes = (await import('../../helpers.ts')).readRepoFile('infra/routes/example.yaml');
    const verbose = memoryIo({ 'routes.yaml': routes, '-': '' });
    expect(await main(['plan', '--routes', 'routes.yaml', '--verbose'], verbose)).toBe(0);
    expect(verbose.err).toContain('vault-rollout plan: debug: ');
    const quiet = { ...memoryIo({ 'routes.yaml': routes, '-': '' }), stdinIsTTY: true };
    let err = '';
    quiet.stderr = (t: string) => void (err += t);
    expect(await main(['plan', '--routes', 'routes.yaml', '--quiet'], quiet)).toBe(0);
    expect(err).toBe('');
  });
});

describe('json and yaml print safely', () => {
  it.each(['json', 'yaml'])('%s escapes what a terminal would obey, and parses to the same data', async (output) => {
    const data = { why: 'evil\u001b]0;title\u0007 \u202emoc.elgoog \u009b31m', n: 1 };
    const io = memoryIo();
    printData(
      io,
      output,
      () => data,
      () => '',
    );
    // No control character but the newlines between lines, no bidirectional override.
    expect([...io.out].filter((c) => c !== '\n' && (/\p{Cc}/u.test(c) || c === '\u202e'))).toEqual([]);
    expect(output === 'json' ? JSON.parse(io.out) : (await import('yaml')).parse(io.out)).toEqual(data);
  });
});

describe('examples', () => {
  /** The vault-rollout part of an example's line, as argv: up to a pipe, a redirection or the end of a `<(…)`. */
  const argvOf = (line: string): string[] =>
    (exampleLine(line).split(/(?:^|\s|<\()vault-rollout /)[1] ?? '')
      .split(/ [|>]|\)/)[0]!
      .trim()
      .split(/\s+/)
      .map((t) => t.replace(/^"(.*)"$/, '$1'));

  it.each(CLI_SPECS.map((s) => [s.name, s] as const))(
    '%s has 2 or 3, each in its --help and in the reference, each parsing',
    async (name, spec) => {
      const examples = EXAMPLES[name] ?? [];
      expect(examples.length).toBeGreaterThanOrEqual(2);
      expect(examples.length).toBeLessThanOrEqual(3);
      const io = memoryIo();
      expect(await main(['help', name], io)).toBe(0);
      const reference = cliReferenceMarkdown();
      for (const [what, line] of examples) {
        expect(io.out).toContain(`  # ${what}\n  ${exampleLine(line)}\n`);
        expect(reference).toContain(`# ${what}\n${exampleLine(line)}\n`);
        const [command, ...argv] = argvOf(line);
        expect(command).toBe(name);
        const parseIo = memoryIo();
        expect(typeof parseCommand(spec, argv, parseIo), `${line}: ${parseIo.err}`).toBe('object');
      }
    },
  );
});
