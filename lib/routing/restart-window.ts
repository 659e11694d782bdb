/**
 * Maintenance windows (`rollout.window`, `rollout.waves[i].window`): the days and the local hours in which a
 * route's restarts may start, in one IANA time zone. The schema checks each field strictly (an `HH:MM` of 24-hour
 * time, a zone Intl knows, days by their short English names) and compiles it to what lib/plan/restart-window.ts
 * computes with; no clock here.
 */
import { z } from 'zod';

export const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const HH_MM = /^([01]\d|2[0-3]):([0-5]\d)$/;

/** Whether Intl knows the zone (an IANA name such as Europe/Berlin, or UTC). */
export function isTimeZone(zone: string): boolean {
  if (zone.length === 0 || zone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const hhmm = () =>
  z
    .string()
    .regex(HH_MM, 'must be a 24-hour time HH:MM, 00:00 to 23:59 (two digits each)')
    .meta({ pattern: HH_MM.source });

export const RestartWindowSchema = z
  .strictObject({
    days: z
      .array(z.enum(WEEKDAYS, { error: `must be one of ${WEEKDAYS.join(', ')}` }))
      .min(1, 'list at least one day')
      .max(WEEKDAYS.length, `at most ${WEEKDAYS.length} days`)
      .refine((d) => new Set(d).size === d.length, 'a day is listed twice')
      .describe('the days on which the window opens (Mon..Sun); a window past midnight closes the next day'),
    from: hhmm().describe('when the window opens, local time of timeZone (HH:MM)'),
    to: hhmm().describe('when it closes (HH:MM); earlier than from: the next day (22:00 to 04:00)'),
    timeZone: z
      .string()
      .max(64)
      .refine(isTimeZone, {
        error: (issue) =>
          `unknown time zone "${String(issue.input).slice(0, 64)}": use an IANA name such as Europe/Berlin or UTC`,
      })
      .describe('the IANA time zone of from and to (Europe/Berlin, America/New_York, UTC)'),
  })
  .refine((w) => w.from !== w.to, {
    message: 'from and to are the same time: the window would have no length',
    path: ['to'],
  })
  .describe(
    'restarts start only inside this window; a change outside it waits and restarts once when it opens (newest version only)',
  );
export type RestartWindowSettings = z.infer<typeof RestartWindowSchema>;

/** A window as it is computed with: day numbers (0 = Monday), minutes after local midnight. */
export interface RestartWindow {
  days: ReadonlySet<number>;
  fromMinute: number;
  toMinute: number;
  timeZone: string;
  /** As the table wrote it, for messages: `Mon,Tue 22:00-04:00 Europe/Berlin`. */
  text: string;
}

const minuteOf = (t: string): number => Number(t.slice(0, 2)) * 60 + Number(t.slice(3, 5));

export function compileWindow(w: RestartWindowSettings): RestartWindow {
  return {
    days: new Set(w.days.map((d) => WEEKDAYS.indexOf(d))),
    fromMinute: minuteOf(w.from),
    toMinute: minuteOf(w.to),
    timeZone: w.timeZone,
    text: `${w.days.join(',')} ${w.from}-${w.to} ${w.timeZone}`,
  };
}

/**
 * A route's windows: its own `window` over the top level's, and the windows of the waves it follows (its own
 * `waves` when it sets them, else the top level's), by wave index.
 */
export function policyWindows(
  top: { window?: RestartWindowSettings; waves?: ReadonlyArray<{ window?: RestartWindowSettings }> } | undefined,
  own: { window?: RestartWindowSettings; waves?: ReadonlyArray<{ window?: RestartWindowSettings }> } | undefined,
): { window?: RestartWindow; waveWindows?: Array<RestartWindow | undefined> } {
  const window = own?.window ?? top?.window;
  const waves = own?.waves ?? top?.waves;
  const waveWindows = waves?.some((w) => w.window !== undefined)
    ? waves.map((w) => (w.window === undefined ? undefined : compileWindow(w.window)))
    : undefined;
  return {
    ...(window === undefined ? {} : { window: compileWindow(window) }),
    ...(waveWindows === undefined ? {} : { waveWindows }),
  };
}
