/**
 * The status page's renderer (lib/report/status-page.ts), table-driven: a halted rotation, one in progress with its
 * waves and gate, failures, an empty fleet, values from the clusters that try to be markup, and the size bounds.
 * The page is parsed back to its text (tags dropped, entities decoded) to say what a reader sees; the markup itself
 * is checked where escaping is the point. The real-browser test is test/integration/status-page.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  MAX_ROWS,
  MAX_ROWS_PER_PATH,
  MAX_PATHS,
  renderStatusPage,
  type StatusPageInput,
} from '../../../lib/report/status-page.ts';
import type { RotationHalt } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { ConsumerStatus, FleetStatus, PathStatus } from '../../../lib/status/fleet-status.ts';
import { pathRotations } from '../../../lib/status/rotation-waves.ts';

const table = loadRoutingTable(`
clusters:
  gamma: { kubeconfig: { file: g } }
  alpha: { kubeconfig: { file: a } }
  beta: { kubeconfig: { file: b } }
vault: { mounts: { secret: 2 } }
routes:
  - name: apps
    match: { path: "secret/app/{svc}" }
    rollout:
      waves: [{ clusters: [gamma] }, { clusters: [alpha] }, { clusters: [beta] }]
      gate: { healthy: true, timeout: 30s, pause: 1m }
      onFailure: halt
    targets: [{ clusters: [gamma, alpha, beta], namespace: apps, names: ["*"], kind: Deployment, name: "{svc}" }]
  - name: flat
    match: { path: "secret/flat/{svc}" }
    targets: [{ clusters: [alpha], namespace: apps, names: ["*"], kind: Deployment, name: "{svc}" }]
`);

const NOW = Date.parse('2026-11-27T13:00:00Z');

const consumer = (cluster: string, name: string, o: Partial<ConsumerStatus> = {}): ConsumerStatus => ({
  cluster,
  namespace: 'apps',
  kind: 'Deployment',
  name,
  recorded: 2,
  state: 'current',
  rollout: 'complete',
  pods: { desired: 2, updated: 2, ready: 2 },
  routed: true,
  ok: true,
  detail: '',
  ...o,
});
const behind = (cluster: string, name: string): ConsumerStatus =>
  consumer(cluster, name, { recorded: 1, state: 'behind', ok: false, detail: 'records 1, current is 2' });

function path(key: string, consumers: ConsumerStatus[], o: Partial<PathStatus> = {}): PathStatus {
  const routed = consumers.filter((c) => c.routed);
  return {
    path: `secret/${key}`,
    vaultNamespace: '',
    mount: 'secret',
    key,
    kvVersion: 2,
    current: 2,
    currentFrom: 'vault',
    vault: { currentVersion: 2, createdTime: '2026-11-27T12:50:00.123Z' },
    consumers,
    notes: [],
    ok: routed.every((c) => c.ok),
    ...o,
  };
}

function halt(o: Partial<RotationHalt> = {}): RotationHalt {
  return {
    rotation: '0123456789abcdef0123',
    route: 'apps',
    changes: ['secret/app/api|2|write'],
    secrets: ['secret/app/api version 2'],
    wave: 1,
    waves: 3,
    failing: { cluster: 'gamma', namespace: 'apps', kind: 'Deployment', name: 'api', state: 'timeout' },
    why: 'Deployment apps/api in cluster gamma: rollout timeout: 0 of 1 new pods Ready',
    notRestarted: ['alpha', 'beta'],
    haltedAt: '2026-11-27T12:55:00.000Z',
    ...o,
  };
}

function input(paths: PathStatus[], halts: RotationHalt[] = [], extra: Partial<StatusPageInput> = {}): StatusPageInput {
  const fleet: FleetStatus = { paths, unreadable: [], notes: [], ok: paths.every((p) => p.ok) };
  return {
    status: { ...fleet, halts, ok: fleet.ok && halts.length === 0 },
    rotations: pathRotations(table, paths, halts),
    store: { name: 'SQLite file /var/lib/vault-rollout/rotations.sqlite' },
    generatedAt: NOW,
    ...extra,
  };
}

/** What a reader sees: the text of the body, tags dropped, entities decoded, white space collapsed. */
function pageText(page: string): string {
  const body = page.slice(page.indexOf('<body>'));
  return body
    .replace(/<\/?(span|code|strong)\b[^>]*>/g, '')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');
}

const cases: Array<{ name: string; input: StatusPageInput; shows: string[]; hides?: string[] }> = [
  {
    name: 'a halted rotation: its reason, wave, failing workload, what was not restarted and the command that clears it',
    input: input(
      [
        path('app/api', [
          consumer('gamma', 'api', {
            rollout: 'timeout',
            ok: false,
            halted: 'wave 1 failed',
            detail: 'halted: wave 1 failed',
          }),
          behind('alpha', 'api'),
          behind('beta', 'api'),
        ]),
      ],
      [halt()],
    ),
    shows: [
      'NOT YET SAFE TO REVOKE',
      'Halted rotations (1)',
      'secret/app/api version 2 halted at wave 1 of 3',
      'Reason Deployment apps/api in cluster gamma: rollout timeout: 0 of 1 new pods Ready',
      'Failing Deployment apps/api in cluster gamma (timeout)',
      'Not restarted alpha, beta',
      'vault-rollout halts clear 0123456789abcdef0123',
      'Rotation store: SQLite file /var/lib/vault-rollout/rotations.sqlite',
      'secret/app/api HALTED at wave 1 of 3',
      'HALTED wave 1: gamma',
      'held back wave 2: alpha',
      'held back wave 3: beta',
      'gamma apps/Deployment/api 2 HALTED timeout 2/2 - halted: wave 1 failed',
      'alpha apps/Deployment/api 1 BEHIND complete 2/2 - records 1, current is 2',
    ],
    hides: ['SAFE TO REVOKE: every', 'Recent failures'],
  },
  {
    name: 'a rotation in progress: each wave in words, the gate, and what the table says per consumer',
    input: input([
      path('app/web', [
        consumer('gamma', 'web'),
        consumer('alpha', 'web', {
          rollout: 'progressing',
          ok: false,
          pods: { desired: 2, updated: 1, ready: 1 },
          detail: '1 of 2 new pods Ready',
        }),
        behind('beta', 'web'),
      ]),
    ]),
    shows: [
      'Rotations in progress (1)',
      'secret/app/web at wave 2 of 3',
      'route apps; gate: every target of a wave rolled out within 30 s, then a pause of 1 min; on failure: halt',
      'complete wave 1: gamma (1 of 1 consumers current and rolled out)',
      'rolling wave 2: alpha (0 of 1 consumers current and rolled out)',
      'waiting wave 3: beta (0 of 1 consumers current and rolled out)',
      'Vault current_version 2 (written 2026-11-27T12:50:00Z); 1 of 3 consumers current and rolled out',
      'alpha apps/Deployment/web 2 rolling progressing 1/2 - 1 of 2 new pods Ready',
    ],
    hides: ['Halted rotations', 'Recent failures'],
  },
  {
    name: 'failures: a failed rollout, a poisoned record with its repair, an unreadable cluster, dead letters',
    input: {
      ...input([
        path('flat/db', [
          consumer('alpha', 'db', { rollout: 'failed', ok: false, detail: 'ProgressDeadlineExceeded' }),
          consumer('alpha', 'db2', {
            recorded: 9,
            state: 'poisoned',
            ok: false,
            detail: 'records version 9, above Vault',
          }),
        ]),
      ]),
      deadLetters: {
        recent: [
          {
            messageId: 'm1',
            groupId: 'alpha',
            receiveCount: 1,
            deadLetteredAt: NOW - 60_000,
            reason: 'refused: a change of a halted rotation',
          },
        ],
        total: 3,
      },
    },
    shows: [
      'Recent failures',
      'FAILED secret/flat/db alpha apps/Deployment/db ProgressDeadlineExceeded',
      'POISONED secret/flat/db alpha apps/Deployment/db2 records version 9, above Vault Repair: vault-rollout reset-version --path secret/flat/db --version 2',
      "Dead letters in serve's queue (3)",
      'DEAD LETTER 2026-11-27T12:59:00Z group alpha, 1 receive(s): refused: a change of a halted rotation',
      '2 more dead letters',
    ],
    // flat's route has no waves: no rotation section for it.
    hides: ['Rotations in progress'],
  },
  {
    name: 'an empty fleet: says so, and is safe',
    input: input([]),
    shows: [
      'SAFE TO REVOKE: every consumer runs the current version and is rolled out.',
      'Secrets (0 paths)',
      'No routed path is recorded in the clusters read.',
      '0 path(s), 0 consumer(s)',
    ],
    hides: ['Halted rotations', 'Rotations in progress', 'Recent failures', 'NOT YET'],
  },
  {
    name: 'a complete rotation: every wave done, nothing in progress',
    input: input([path('app/api', [consumer('gamma', 'api'), consumer('alpha', 'api'), consumer('beta', 'api')])]),
    shows: [
      'SAFE TO REVOKE',
      'ok secret/app/api',
      '3 of 3 consumers current and rolled out',
      'beta apps/Deployment/api 2 current complete 2/2',
    ],
    hides: ['Rotations in progress', 'NOT YET'],
  },
];

describe('renderStatusPage', () => {
  it.each(cases)('$name', ({ input: page, shows, hides = [] }) => {
    const html = renderStatusPage(page);
    const seen = pageText(html);
    for (const s of shows) expect(seen).toContain(s);
    for (const s of hides) expect(seen).not.toContain(s);
  });

  it('is a page a phone can read and that refreshes itself: viewport, meta refresh, words for states, no script', () => {
    const html = renderStatusPage(input([path('app/api', [behind('gamma', 'api')])], [], { refreshSeconds: 15 }));
    expect(html).toMatch(/^<!DOCTYPE html>/);
    expect(html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(html).toContain('<meta http-equiv="refresh" content="15">');
    expect(html).toContain('@media (max-width:640px)');
    expect(html).toContain('data-label="State"');
    expect(html).not.toMatch(/<script/i);
    expect(pageText(html)).toContain('refreshes every 15 s');
    expect(renderStatusPage(input([], [], { refreshSeconds: 0 }))).not.toContain('http-equiv="refresh"');
  });

  const attacks = [
    '<img src=x onerror=alert(1)>',
    '"><script>alert(document.cookie)</script>',
    "' onmouseover='alert(1)",
    '</textarea></style><svg onload=alert(1)>',
    'a\u202eevil\u001b[2J',
  ];
  it.each(attacks)('escapes what the clusters wrote: %j', (attack) => {
    const page = input(
      [
        path(
          `app/${attack}`,
          [
            consumer('gamma', attack, {
              namespace: attack,
              detail: attack,
              rollout: 'failed',
              ok: false,
              halted: attack,
            }),
            consumer('alpha', 'x', { routed: false, recorded: attack, detail: attack }),
          ],
          { notes: [attack] },
        ),
      ],
      [
        halt({
          secrets: [`secret/app/${attack} version 2`],
          why: attack,
          route: attack,
          failing: { cluster: attack, namespace: attack, kind: attack, name: attack, state: attack },
          notRestarted: [attack],
        }),
      ],
      {
        source: attack,
        deadLetters: {
          recent: [{ messageId: attack, groupId: attack, receiveCount: 1, deadLetteredAt: NOW, reason: attack }],
          total: 1,
        },
      },
    );
    page.status.unreadable.push({ cluster: attack, error: attack });
    page.status.notes.push(attack);
    const html = renderStatusPage(page);
    // No element, attribute or end tag of the attack survives as markup.
    expect(html).not.toMatch(/<(img|script|svg)\b/i);
    expect(html).not.toMatch(/<\/(textarea|script)>/i);
    expect(html).not.toMatch(/<[^>]*\son\w+=/i);
    expect(html.includes('\u202e') || html.includes('\u001b')).toBe(false);
    // It is shown as text, escaped for HTML (and, like the terminal, control and bidi characters as escapes).
    const shown = attack.replace('\u202e', '\\u202e').replace('\u001b', '\\x1b');
    expect(pageText(html)).toContain(shown);
  });

  it('is bounded: at most MAX_ROWS_PER_PATH rows per path, those needing a look first, MAX_PATHS paths and MAX_ROWS rows, the rest counted', () => {
    const many = Array.from({ length: MAX_ROWS_PER_PATH + 30 }, (_, i) =>
      i === MAX_ROWS_PER_PATH + 20 ? behind('beta', `w${i}`) : consumer('alpha', `w${String(i).padStart(3, '0')}`),
    );
    const one = pageText(renderStatusPage(input([path('app/big', many)])));
    expect(one).toContain(
      '30 more consumers of this path (all of them: vault-rollout status --path secret/app/big --json)',
    );
    // The one BEHIND consumer is listed although it sorts last.
    expect(one).toContain(`beta apps/Deployment/w${MAX_ROWS_PER_PATH + 20} 1 BEHIND`);

    const paths = Array.from({ length: MAX_PATHS + 7 }, (_, i) =>
      path(
        `flat/p${String(i).padStart(4, '0')}`,
        Array.from({ length: MAX_ROWS_PER_PATH }, (__, j) => consumer('alpha', `w${j}`)),
      ),
    );
    const html = renderStatusPage(input(paths));
    const rows = html.match(/<tr><td data-label="Cluster">/g)?.length ?? 0;
    expect(rows).toBe(MAX_ROWS);
    const seen = pageText(html);
    expect(seen).toContain('7 more paths (narrow with status --path)');
    expect(seen).toContain(`${MAX_ROWS_PER_PATH} more consumers of this path`);
    expect(html.length).toBeLessThan(2_000_000);
  });
});

describe('the commands the page suggests', () => {
  // Record keys are text tenants write on their own objects; the page offers its commands for copying whole.
  const commandsOf = (html: string): string[] =>
    [...html.matchAll(/<code class="cmd">([^<]*)<\/code>/g)].map((m) =>
      (m[1] ?? '')
        .replace(/&#39;/g, "'")
        .replace(/&quot;/g, '"')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&amp;/g, '&'),
    );
  /** vault-rollout's arguments as a real shell passes them (NUL-separated): the command word becomes a function. */
  const argv = (command: string): string[] =>
    execFileSync('sh', ['-c', `args() { printf '%s\\0' "$@"; }\n${command.replace(/^vault-rollout /, 'args ')}`], {
      encoding: 'utf8',
    })
      .split('\0')
      .slice(0, -1);
  const many = (n: number, o: Partial<ConsumerStatus> = {}) =>
    Array.from({ length: n }, (_, i) => consumer('alpha', `w${i}`, o));

  const keys = ['app/x$(touch /nonexistent/pwned)', 'app/a`id`;b', "app/it's|sh", 'app/a b&c'];
  it.each(keys)('quote every value as one word a shell takes literally: secret/%s', (key) => {
    const poisoned = consumer('alpha', 'p', { recorded: 9, state: 'poisoned', ok: false, detail: 'poisoned' });
    const env = "VAULT_ROLLOUT_STATE_DB='/tmp/a b'";
    const html = renderStatusPage(
      input([path(key, [...many(MAX_ROWS_PER_PATH), poisoned])], [halt({ rotation: 'r$(id)' })], {
        store: { name: 's', env },
      }),
    );
    const commands = commandsOf(html).map((c) => (c.startsWith(`${env} `) ? c.slice(env.length + 1) : c));
    expect(commands.map(argv).sort()).toEqual(
      [
        ['halts', 'clear', 'r$(id)'],
        ['reset-version', '--path', `secret/${key}`, '--version', '2'],
        ['status', '--path', `secret/${key}`, '--json'],
      ].sort(),
    );
  });

  it('offer no command for a key no Vault path could be', () => {
    const html = renderStatusPage(input([path('app/../x', many(MAX_ROWS_PER_PATH + 2))]));
    expect(commandsOf(html)).toEqual([]);
    expect(pageText(html)).toContain(
      '2 more consumers of this path (all of them: (no command: the key is no Vault path))',
    );
  });

  it('list only the consumers the routes target: a record on an object no route restarts is not shown or counted', () => {
    const html = renderStatusPage(
      input([
        path('app/api', [
          ...many(3),
          ...Array.from({ length: MAX_ROWS_PER_PATH + 5 }, (_, i) => consumer('beta', `tenant${i}`, { routed: false })),
        ]),
      ]),
    );
    expect(pageText(html)).not.toContain('tenant');
    expect(pageText(html)).not.toContain('more consumers');
    expect(commandsOf(html)).toEqual([]);
  });
});
