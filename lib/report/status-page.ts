/**
 * The fleet status page: what `vault-rollout status` computes, as one HTML document — served by
 * `serve --status-page` at GET /status, and written by `status --output html` for teams on Lambda. One renderer for
 * both; it reads nothing, it lays out a status already computed (fleetStatus, the store's halts, pathRotations).
 *
 * - Server-rendered with hono's `html` helper: no script, no front-end build. Every value is interpolated through
 *   it, so it is HTML-escaped (`& < > ' "`); values also go through `printable` first, so a control character or a
 *   bidirectional override from a cluster shows as an escape, as in the terminal table. Paths, workload names,
 *   record keys, Event messages and conditions all come from objects tenants write.
 * - Refreshes itself (`<meta http-equiv="refresh">`), fits a phone (a viewport, tables that become one block per
 *   row on a narrow screen), and says every state in words (HALTED, FAILED, BEHIND …): colour only repeats them.
 * - Commands it suggests (copied whole by a click) are safe to paste: every value in them is one shell-quoted word
 *   (kernel/shell-quote.ts), a key no Vault path could be gets no command, and only consumers the routes target are
 *   listed: a tenant's record key on an object no route restarts is not the operator's business.
 * - Bounded: at most MAX_PATHS paths, MAX_ROWS_PER_PATH rows per path and MAX_ROWS rows in all, those that need a
 *   look first; what is left out is counted ("N more"), never dropped silently.
 */
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { DeadLetter } from '../queue/local-queue.ts';
import type { RotationHalt } from '../rotations/rotation-store.ts';
import type { ApprovalRecord } from '../rotations/approvals.ts';
import type { ConsumerStatus, FleetStatus, PathStatus } from '../status/fleet-status.ts';
import type { PathRotation, WaveState } from '../status/rotation-waves.ts';
import { shellQuote } from '../kernel/shell-quote.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import { printable } from './printable.ts';
import { consumerVerdict, runningPodsText, summaryCounts, summaryLine, unreadableText } from './status-report.ts';

export const MAX_PATHS = 200;
export const MAX_ROWS_PER_PATH = 25;
export const MAX_ROWS = 1_000;
export const MAX_LISTED = 50;
/** Longest text shown in one cell (details, reasons): the rest is cut with an ellipsis. */
const MAX_CELL = 300;
export const DEFAULT_REFRESH_SECONDS = 30;

export interface StatusPageInput {
  /** fleetStatus with the store's halts; `ok` already false while a halt holds (as `status` computes it). */
  status: FleetStatus & { halts: readonly RotationHalt[]; awaitingApproval?: readonly ApprovalRecord[] };
  /** pathRotations: per path whose route has waves. */
  rotations: ReadonlyMap<string, PathRotation>;
  /** The rotation store's name (`SQLite file …`, `DynamoDB table …`), and the environment that points the CLI at it. */
  store: { name: string; env?: string };
  /** When the status was read (ms). */
  generatedAt: number;
  /** 0: no refresh. */
  refreshSeconds?: number;
  /** serve's newest dead letters, newest last (refused or out of receives), and how many there are in all. */
  deadLetters?: { recent: ReadonlyArray<Omit<DeadLetter, 'body'>>; total: number };
  /** Where the page comes from, shown in its header (`serve on host:port`, `status --output html`). */
  source?: string;
}

type Html = HtmlEscapedString;
/** What a cell shows: printable (controls escaped), cut to a bound; the html helper escapes the markup. */
const text = (s: string | number | null | undefined, max = MAX_CELL): string => {
  const p = printable(s === null || s === undefined ? '-' : String(s));
  return p.length > max ? `${p.slice(0, max)}…` : p;
};
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
const seconds = (ms: number): string =>
  ms % 60_000 === 0 && ms >= 60_000 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
/** Synchronous: nothing interpolated is a promise. */
const h = (strings: TemplateStringsArray, ...values: unknown[]): Html => html(strings, ...values) as Html;

/** A state as a word, with a class that colours it (the word alone says it all). */
type Tone = 'bad' | 'warn' | 'ok' | 'muted';
const badge = (word: string, tone: Tone): Html => h`<span class="state ${tone}">${word}</span>`;

const verdictTone = (verdict: string): Tone =>
  ['HALTED', 'FAILED', 'TIMEOUT', 'POISONED'].includes(verdict)
    ? 'bad'
    : ['BEHIND', 'UNKNOWN', 'rolling', 'OLD PODS', 'PODS UNREAD', 'skipped by keys (unverified)'].includes(verdict)
      ? 'warn'
      : verdict === 'current'
        ? 'ok'
        : 'muted';
const waveTone = (s: WaveState): Tone =>
  s === 'halted' || s === 'failed' ? 'bad' : s === 'complete' ? 'ok' : s === 'no consumers' ? 'muted' : 'warn';
const waveWord = (s: WaveState): string => (s === 'halted' || s === 'failed' ? s.toUpperCase() : s);

/** Those needing a look first, in the order of `status` otherwise. */
const attentionFirst = (consumers: readonly ConsumerStatus[]): ConsumerStatus[] => [
  ...consumers.filter((c) => !c.ok && c.routed),
  ...consumers.filter((c) => c.ok || !c.routed),
];

function currentText(p: PathStatus): string {
  if (p.currentFrom === 'vault' && p.vault && 'currentVersion' in p.vault)
    return `Vault current_version ${p.vault.currentVersion}${p.vault.createdTime ? ` (written ${p.vault.createdTime.replace(/\.\d+Z$/, 'Z')})` : ''}`;
  if (p.currentFrom === 'records') return `newest recorded: ${JSON.stringify(p.current)} (Vault not read)`;
  return 'no version known';
}

/** Longest command shown: a longer one is not cut (a cut quote could change its meaning), it is left out. */
const MAX_COMMAND = 2_000;
/**
 * A suggested command from words: the first is vault-rollout's own text (`halts clear`), each value after it one
 * shell-quoted word. None at all (empty) when a value is too long to show whole.
 */
function command(words: readonly string[], values: readonly string[] = []): Html {
  const line = [...words, ...values.map(shellQuote)].join(' ');
  if (line.length > MAX_COMMAND || line !== printable(line)) return h``;
  return h`<code class="cmd">${line}</code>`;
}
/** A command about one path: none for a key no Vault path could be (it is a tenant's text, not a secret's path). */
const pathCommand = (path: string, build: (quotedPath: string) => string[]): Html =>
  vaultPathProblem(path) === undefined ? command(build(shellQuote(path))) : h`(no command: the key is no Vault path)`;
/** The environment assignment that points the CLI at the rotation store, as `status` quoted it; empty when none. */
const storeEnv = (input: StatusPageInput): string[] => (input.store.env ? [input.store.env] : []);

/** Waves waiting for `vault-rollout approve` (rollout.gate.approval), each with the command that approves it. */
function approvalsSection(input: StatusPageInput): Html {
  const waiting = input.status.awaitingApproval ?? [];
  if (waiting.length === 0) return h``;
  const env = storeEnv(input);
  const shown = waiting.slice(0, MAX_LISTED);
  return h`<section id="approvals"><h2>${badge('WAITING', 'warn')} Waiting for approval (${waiting.length})</h2>
${shown.map(
  (
    x,
  ) => h`<div class="card warn"><p><strong>${text(x.secrets.join(', '))}</strong>: wave ${x.wave} of ${x.waves} waits for approval (since ${text(x.since)}): ${command([...env, 'vault-rollout', 'approve'], [x.rotation, '--wave', String(x.wave)])}</p>
<dl><dt>Rotation</dt><dd><code>${text(x.rotation)}</code> (route ${text(x.route || '-')})</dd></dl></div>`,
)}${waiting.length > shown.length ? h`<p class="more">${waiting.length - shown.length} more: ${command([...env, 'vault-rollout', 'approve', '--list'])}</p>` : ''}</section>`;
}

function haltsSection(input: StatusPageInput): Html {
  const halts = input.status.halts;
  if (halts.length === 0) return h``;
  const env = storeEnv(input);
  const shown = halts.slice(0, MAX_LISTED);
  return h`<section id="halts"><h2>${badge('HALTED', 'bad')} Halted rotations (${halts.length})</h2>
${shown.map(
  (
    x,
  ) => h`<div class="card bad"><p><strong>${text(x.secrets.join(', '))}</strong> halted at wave ${x.wave} of ${x.waves}, ${text(x.haltedAt)}</p>
<dl><dt>Reason</dt><dd>${text(x.why, 1_000)}</dd>
<dt>Failing</dt><dd>${text(`${x.failing.kind} ${x.failing.namespace}/${x.failing.name} in cluster ${x.failing.cluster} (${x.failing.state})`)}</dd>
<dt>Not restarted</dt><dd>${text(x.notRestarted.join(', ') || 'none')}</dd>
<dt>Rotation</dt><dd><code>${text(x.rotation)}</code> (route ${text(x.route || '-')})</dd>
<dt>Resume</dt><dd>Fix the cause, then clear the halt — the next change or reconcile of these versions starts again from wave 1: ${command([...env, 'vault-rollout', 'halts', 'clear'], [x.rotation])} — or write a fixed version of the secret (a new rotation, from wave 1).</dd></dl></div>`,
)}${halts.length > shown.length ? h`<p class="more">${halts.length - shown.length} more halts: ${command([...env, 'vault-rollout', 'halts'])}</p>` : ''}
<p class="muted">Rotation store: ${text(input.store.name)}</p></section>`;
}

function rotationsSection(input: StatusPageInput): Html {
  const rotating = [...input.rotations].filter(([, r]) => r.state !== 'complete');
  if (rotating.length === 0) return h``;
  const shown = rotating.slice(0, MAX_LISTED);
  return h`<section id="rotations"><h2>Rotations in progress (${rotating.length})</h2>
${shown.map(([path, r]) => {
  const gate = `gate: ${r.gate.healthy ? 'every target of a wave rolled out' : 'every target of a wave restarted'} within ${seconds(r.gate.timeoutMs)}${r.gate.pauseMs > 0 ? `, then a pause of ${seconds(r.gate.pauseMs)}` : ''}; on failure: ${r.onFailure}`;
  const where =
    r.state === 'halted'
      ? `HALTED at wave ${r.waves.find((w) => w.state === 'halted')?.number ?? '?'} of ${r.waves.length}`
      : r.state === 'failed'
        ? `FAILED in wave ${r.waves.find((w) => w.state === 'failed')?.number ?? '?'} of ${r.waves.length}`
        : `at wave ${r.at} of ${r.waves.length}`;
  return h`<div class="card ${r.state === 'in progress' ? 'warn' : 'bad'}"><p><strong>${text(path)}</strong> ${badge(where, r.state === 'in progress' ? 'warn' : 'bad')} <span class="muted">route ${text(r.route)}; ${text(gate)}</span></p>
<ol class="waves">${r.waves.map((w) => h`<li>${badge(waveWord(w.state), waveTone(w.state))} wave ${w.number}: ${text(w.clusters.join(', '))} <span class="muted">(${w.ok} of ${w.consumers} consumers current and rolled out)</span></li>`)}</ol></div>`;
})}${rotating.length > shown.length ? h`<p class="more">${rotating.length - shown.length} more rotations in progress</p>` : ''}</section>`;
}

function failuresSection(input: StatusPageInput): Html {
  const { status } = input;
  const bad = status.paths.flatMap((p) =>
    p.consumers
      .filter((c) => c.routed && ['FAILED', 'TIMEOUT', 'POISONED', 'UNKNOWN'].includes(consumerVerdict(c)))
      .map((c) => ({ p, c })),
  );
  const dead = input.deadLetters?.recent ?? [];
  const deadTotal = Math.max(input.deadLetters?.total ?? 0, dead.length);
  if (bad.length === 0 && status.unreadable.length === 0 && deadTotal === 0) return h``;
  const shown = bad.slice(0, MAX_LISTED);
  const deadShown = dead.slice(-MAX_LISTED).reverse();
  return h`<section id="failures"><h2>Recent failures (${bad.length + status.unreadable.length + deadTotal})</h2>
${
  shown.length > 0
    ? h`<table><thead><tr><th>State</th><th>Secret</th><th>Cluster</th><th>Workload</th><th>Detail</th></tr></thead><tbody>${shown.map(
        ({ p, c }) => {
          const v = consumerVerdict(c);
          const fix =
            c.state === 'poisoned' && typeof p.current === 'number'
              ? h`<br>Repair: ${pathCommand(p.path, (path) => ['vault-rollout', 'reset-version', '--path', path, '--version', String(p.current)])}`
              : '';
          return h`<tr><td data-label="State">${badge(v, verdictTone(v))}</td><td class="wrap" data-label="Secret">${text(p.path)}</td><td data-label="Cluster">${text(c.cluster)}</td><td class="wrap" data-label="Workload">${text(`${c.namespace || '-'}/${c.kind}/${c.name}`)}</td><td class="wrap" data-label="Detail">${text(c.detail)}${fix}</td></tr>`;
        },
      )}</tbody></table>${bad.length > shown.length ? h`<p class="more">${bad.length - shown.length} more failed consumers</p>` : ''}`
    : ''
}
${status.unreadable.length > 0 ? h`<ul>${status.unreadable.slice(0, MAX_LISTED).map((u) => h`<li>${badge('UNREADABLE', 'bad')} cluster ${text(u.cluster)}: ${text(u.error)}</li>`)}</ul>${status.unreadable.length > MAX_LISTED ? h`<p class="more">${status.unreadable.length - MAX_LISTED} more unreadable lists</p>` : ''}` : ''}
${deadShown.length > 0 ? h`<h3>Dead letters in serve's queue (${deadTotal})</h3><ul>${deadShown.map((d) => h`<li>${badge('DEAD LETTER', 'bad')} ${text(iso(d.deadLetteredAt))} group ${text(d.groupId)}, ${d.receiveCount} receive(s): ${text(d.reason ?? 'out of receives (the worker failed each time)')}</li>`)}</ul>${deadTotal > deadShown.length ? h`<p class="more">${deadTotal - deadShown.length} more dead letters</p>` : ''}` : ''}
</section>`;
}

/** Why there is no path to show: none recorded, or clusters that could not be read. */
const noPathText = (status: FleetStatus): string =>
  status.unreadable.length > 0
    ? text(`No routed path could be read: ${unreadableText(status)}.`)
    : 'No routed path is recorded in the clusters read.';

function pathsSection(input: StatusPageInput): Html {
  const { paths } = input.status;
  let budget = MAX_ROWS;
  const shownPaths = paths.slice(0, MAX_PATHS);
  return h`<section id="paths"><h2>Secrets (${paths.length} path${paths.length === 1 ? '' : 's'})</h2>
${paths.length === 0 ? h`<p>${noPathText(input.status)}</p>` : ''}
${shownPaths.map((p) => {
  const routed = p.consumers.filter((c) => c.routed);
  const n = Math.max(0, Math.min(MAX_ROWS_PER_PATH, budget, routed.length));
  budget -= n;
  const rows = attentionFirst(routed).slice(0, n);
  return h`<div class="path"><h3 id="${`p-${encodeURIComponent(p.path)}`}">${badge(p.ok ? 'ok' : 'NOT YET', p.ok ? 'ok' : 'bad')} ${text(p.path)}</h3>
<p class="muted">${text(currentText(p))}${p.kvVersion === 1 ? ' [KV v1]' : ''}; ${routed.filter((c) => c.ok).length} of ${routed.length} consumers current and rolled out</p>
${
  routed.length === 0
    ? h`<p>No consumer the routes target found in the clusters read.</p>`
    : h`<table><thead><tr><th>Cluster</th><th>Workload</th><th>Running</th><th>State</th><th>Rollout</th><th>New pods</th><th>Pods on record / older</th><th>Detail</th></tr></thead><tbody>${rows.map(
        (c) => {
          const v = consumerVerdict(c);
          return h`<tr><td data-label="Cluster">${text(c.cluster)}</td><td class="wrap" data-label="Workload">${text(`${c.namespace || '-'}/${c.kind}/${c.name}`)}</td><td data-label="Running">${text(c.recorded === null ? '-' : String(c.recorded))}</td><td data-label="State">${badge(v, verdictTone(v))}</td><td data-label="Rollout">${text(c.rollout)}</td><td data-label="New pods">${c.pods ? `${c.pods.updated}/${c.pods.desired}` : '-'}</td><td data-label="Pods on record / older">${runningPodsText(c)}</td><td class="wrap" data-label="Detail">${c.ok ? '' : text(c.detail)}</td></tr>`;
        },
      )}</tbody></table>`
}
${routed.length > rows.length ? h`<p class="more">${routed.length - rows.length} more consumers of this path (all of them: ${pathCommand(p.path, (path) => ['vault-rollout', 'status', '--path', path, '--json'])})</p>` : ''}
${p.notes.map((note) => h`<p class="note">note: ${text(note, 1_000)}</p>`)}</div>`;
})}${paths.length > shownPaths.length ? h`<p class="more">${paths.length - shownPaths.length} more paths (narrow with <code>status --path</code>)</p>` : ''}</section>`;
}

const STYLE = raw(`
:root{color-scheme:light dark;--bad:#b00020;--warn:#8a5a00;--ok:#1b6e20;--muted:#666;--line:#ccc}
@media (prefers-color-scheme:dark){:root{--bad:#ff6b81;--warn:#f0b429;--ok:#6fcf73;--muted:#aaa;--line:#444}}
body{font:15px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:0 12px 24px}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1em;margin:1.2em 0 .2em;overflow-wrap:anywhere}
.state{font-weight:700;white-space:nowrap}.state.bad{color:var(--bad)}.state.warn{color:var(--warn)}.state.ok{color:var(--ok)}.state.muted,.muted{color:var(--muted)}
.verdict{font-size:1.1em;padding:8px 12px;border:2px solid var(--line);border-radius:6px}.verdict.bad{border-color:var(--bad)}.verdict.ok{border-color:var(--ok)}
.card{border:1px solid var(--line);border-left:6px solid var(--warn);border-radius:4px;padding:4px 12px;margin:8px 0}.card.bad{border-left-color:var(--bad)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
code{font:13px ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}code.cmd{display:inline-block;padding:1px 4px;border:1px solid var(--line);border-radius:3px;user-select:all}
ol.waves{margin:4px 0 8px;padding-left:1.2em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 6px;border-bottom:1px solid var(--line);vertical-align:top;white-space:nowrap}td.wrap{white-space:normal;overflow-wrap:anywhere}
.more,.note{font-style:italic}
@media (max-width:640px){table,thead,tbody,tr,th,td{display:block}thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
tr{border:1px solid var(--line);border-radius:4px;margin:6px 0;padding:4px}td{border:0;padding:1px 4px;white-space:normal;overflow-wrap:anywhere}
td::before{content:attr(data-label) ": ";font-weight:600}td:empty{display:none}dl{grid-template-columns:1fr}}
`);

/** The whole page, as a string. */
export function renderStatusPage(input: StatusPageInput): string {
  const { status } = input;
  const counts = summaryCounts(status);
  const refresh = input.refreshSeconds ?? DEFAULT_REFRESH_SECONDS;
  const attention = (['behind', 'failed', 'halted', 'poisoned', 'unknown'] as const).reduce(
    (n, k) => n + (counts[k] ?? 0),
    status.halts.length,
  );
  const unread = status.unreadable.length > 0 ? unreadableText(status) : undefined;
  // Cluster names come from the routing table: shown as text, like every other name on the page.
  const why =
    unread === undefined
      ? 'some consumer is not on the current version, or not rolled out.'
      : text(`${unread}, so what runs there is not known.`, 1_000);
  const verdict = status.ok
    ? 'every consumer runs the current version and is rolled out.'
    : `${status.halts.length > 0 ? `${status.halts.length} halted rotation(s); ` : ''}${why}`;
  const needAttention = `${attention} need attention`;
  const title = status.ok
    ? 'OK'
    : unread === undefined
      ? needAttention
      : attention > 0
        ? `${unread}; ${needAttention}`
        : unread;
  const page = h`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${refresh > 0 ? h`<meta http-equiv="refresh" content="${refresh}">` : ''}
<title>${text(title)} · vault-rollout status</title><style>${STYLE}</style></head>
<body><header><h1>vault-rollout fleet status</h1>
<p class="muted">Read ${text(iso(input.generatedAt))}${input.source ? ` by ${text(input.source)}` : ''}${refresh > 0 ? `; refreshes every ${refresh} s` : ''}.</p>
<p class="verdict ${status.ok ? 'ok' : 'bad'}" id="verdict">${badge(status.ok ? 'SAFE TO REVOKE' : 'NOT YET SAFE TO REVOKE', status.ok ? 'ok' : 'bad')}: ${verdict}</p>
<p id="summary">${text(summaryLine(status), 1_000)}</p></header>
<main>${haltsSection(input)}${approvalsSection(input)}${rotationsSection(input)}${failuresSection(input)}${pathsSection(input)}
${status.notes.length > 0 ? h`<section id="notes"><h2>Notes</h2>${status.notes.map((n) => h`<p class="note">${text(n, 1_000)}</p>`)}</section>` : ''}</main>
<footer><p class="muted">The same data as <code>vault-rollout status</code> (<code>--json</code> for all of it). States are words: HALTED, FAILED, TIMEOUT, POISONED and UNKNOWN need a look; BEHIND and rolling are on their way; OLD PODS: pods of an older template still run (never safe); current is done.</p></footer>
</body></html>
`;
  return page.toString();
}
