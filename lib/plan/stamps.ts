/** The time a restart records: UTC seconds, as `kubectl rollout restart` writes them. */

/** Vault stamps nanoseconds and any offset; annotations get UTC seconds like `kubectl rollout restart`. */
export function rfc3339Seconds(time: string): string | null {
  const ms = Date.parse(time);
  return Number.isNaN(ms) ? null : new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** The latest of the times, as annotations carry it (UTC seconds); null when none parses. */
export function newestStamp(
  dated: ReadonlyArray<{ time: string }>,
  stamp: (time: string) => string | null = rfc3339Seconds,
): string | null {
  let newest: string | null = null;
  for (const d of dated) {
    const at = stamp(d.time);
    if (at !== null && (newest === null || at > newest)) newest = at;
  }
  return newest;
}
