/**
 * When a maintenance window lets a restart start: open now, or the instant it next opens. Pure (`now` is an
 * argument) and wall-clock based in the window's own time zone, so a window keeps its local hours across daylight
 * saving changes: a window opening at a local time that a spring-forward skips opens at the first instant after the
 * gap, and one whose local time a fall-back repeats opens at the first of the two.
 */
import type { RestartWindow } from '../routing/restart-window.ts';
import type { ChangeSet } from './waves.ts';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

interface LocalTime {
  year: number;
  month: number;
  day: number;
  /** 0 = Monday … 6 = Sunday. */
  weekday: number;
  minute: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      weekday: 'short',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

const WEEKDAY_INDEX: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

/** The wall-clock time of an instant in a zone. */
export function localTime(epochMs: number, timeZone: string): LocalTime {
  const parts: Record<string, string> = {};
  for (const p of formatter(timeZone).formatToParts(epochMs)) parts[p.type] = p.value;
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    weekday: WEEKDAY_INDEX[parts.weekday ?? ''] ?? 0,
    minute: Number(parts.hour) * 60 + Number(parts.minute),
  };
}

/** The zone's offset from UTC at an instant, in ms (whole minutes). */
function offsetAt(epochMs: number, timeZone: string): number {
  const t = localTime(epochMs, timeZone);
  const asUtc = Date.UTC(t.year, t.month - 1, t.day) + t.minute * MINUTE_MS;
  const floored = Math.floor(epochMs / MINUTE_MS) * MINUTE_MS;
  return asUtc - floored;
}

/**
 * The instant a local date and minute stand for: the earlier of two (a fall-back repeats it), or, for a time a
 * spring-forward skips, the first instant after the gap.
 */
export function instantOf(year: number, month: number, day: number, minute: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day) + minute * MINUTE_MS;
  const offsets = [...new Set([offsetAt(wall - DAY_MS, timeZone), offsetAt(wall + DAY_MS, timeZone)])];
  const matching = offsets
    .map((o) => wall - o)
    .filter((t) => {
      const l = localTime(t, timeZone);
      return l.year === year && l.month === month && l.day === day && l.minute === minute;
    });
  if (matching.length > 0) return Math.min(...matching);
  // In a gap: the first minute whose local time is at or past the wanted one, between the two readings.
  const wallOf = (t: number) => {
    const l = localTime(t, timeZone);
    return Date.UTC(l.year, l.month - 1, l.day) + l.minute * MINUTE_MS;
  };
  let lo = Math.min(...offsets.map((o) => wall - o));
  let hi = Math.max(...offsets.map((o) => wall - o));
  while (hi - lo > MINUTE_MS) {
    const mid = lo + Math.floor((hi - lo) / 2 / MINUTE_MS) * MINUTE_MS;
    if (wallOf(mid) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/**
 * Whether the window is open at `now` (from inclusive, to exclusive; a window past midnight belongs to its opening
 * day).
 */
export function isWindowOpen(w: RestartWindow, now: number): boolean {
  const t = localTime(now, w.timeZone);
  if (w.fromMinute < w.toMinute) return w.days.has(t.weekday) && t.minute >= w.fromMinute && t.minute < w.toMinute;
  const yesterday = (t.weekday + 6) % 7;
  return (w.days.has(t.weekday) && t.minute >= w.fromMinute) || (w.days.has(yesterday) && t.minute < w.toMinute);
}

/**
 * `now` when the window is open, else the next instant it opens (within the next eight local days: every window
 * opens at least once a week).
 */
export function windowOpensAt(w: RestartWindow, now: number): number {
  if (isWindowOpen(w, now)) return now;
  const today = localTime(now, w.timeZone);
  for (let i = 0; i <= 8; i++) {
    // Noon of the i-th local day: a safe anchor for its date whatever the offset.
    const anchor = instantOf(today.year, today.month, today.day, 720, w.timeZone) + i * DAY_MS;
    const d = localTime(anchor, w.timeZone);
    if (!w.days.has(d.weekday)) continue;
    const opens = instantOf(d.year, d.month, d.day, w.fromMinute, w.timeZone);
    if (opens > now) return opens;
  }
  // Unreachable for a compiled window (at least one day); a week on is the safe answer.
  return now + 7 * DAY_MS;
}

/** Where a restart stands against its windows: open, or waiting until the latest of their openings. */
export type WindowState = { open: true } | { open: false; opensAt: number; window: string };

/**
 * The state under several windows (a message whose change sets each have one): open only when every one is; else
 * it waits for the latest opening among the closed ones, and is looked at again then.
 */
export function windowState(windows: readonly RestartWindow[], now: number): WindowState {
  let closed: { opensAt: number; window: string } | undefined;
  for (const w of windows) {
    const opensAt = windowOpensAt(w, now);
    if (opensAt > now && (closed === undefined || opensAt > closed.opensAt)) closed = { opensAt, window: w.text };
  }
  return closed === undefined ? { open: true } : { open: false, ...closed };
}

/** How status, the worker and `apply` say it. */
export const waitsForWindow = (opensAt: number): string =>
  `waits for its window (opens ${new Date(opensAt).toISOString()})`;

/**
 * The windows a cluster's restarts of these change sets wait for: per set, its wave's window (`waves[i].window`)
 * over the rollout's; the clusters in no wave follow the rollout's.
 */
export function clusterWindows(
  sets: ReadonlyArray<Pick<ChangeSet, 'policy' | 'waves'>>,
  cluster: string,
): RestartWindow[] {
  const windows: RestartWindow[] = [];
  for (const set of sets) {
    const wave = set.waves.find((w) => w.clusters.includes(cluster));
    if (!wave) continue;
    const w = wave.from === 'rest' ? set.policy.window : (set.policy.waveWindows?.[wave.from] ?? set.policy.window);
    if (w) windows.push(w);
  }
  return windows;
}
