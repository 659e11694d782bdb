/**
 * The logs of the relay, status and reconcile: JSON lines on stderr. Callers pass counts, paths of files, addresses and
 * reasons — never the
 * webhook secret, the Vault token or record contents, which may carry secrets (HMACed or not).
 */
import type { Fields } from './telemetry.ts';

export interface RelayLog {
  info(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  error(message: string, fields?: Fields): void;
}

/**
 * JSON lines from `component` (relay, status, reconcile: the command that logs, so a reader can tell them apart in one
 * stream). `quiet` drops the info lines (--quiet); warnings and errors always go out.
 */
export function jsonLinesLog(
  write: (text: string) => void,
  now: () => number = Date.now,
  component = 'relay',
  quiet = false,
): RelayLog {
  const log = (level: string) => (message: string, fields?: Fields) =>
    write(`${JSON.stringify({ time: new Date(now()).toISOString(), level, component, message, ...fields })}\n`);
  return { info: quiet ? () => undefined : log('info'), warn: log('warn'), error: log('error') };
}

/** A log that keeps its lines, for tests. */
export function memoryLog(): RelayLog & { lines: Array<{ level: string; message: string; fields?: Fields }> } {
  const lines: Array<{ level: string; message: string; fields?: Fields }> = [];
  const log = (level: string) => (message: string, fields?: Fields) =>
    void lines.push({ level, message, ...(fields ? { fields } : {}) });
  return { lines, info: log('info'), warn: log('warn'), error: log('error') };
}
