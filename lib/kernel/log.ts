/**
 * The relay's logs: JSON lines on stderr. Callers pass counts, paths of files, addresses and reasons — never the
 * webhook secret, the Vault token or record contents, which may carry secrets (HMACed or not).
 */
import type { Fields } from './telemetry.ts';

export interface RelayLog {
  info(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  error(message: string, fields?: Fields): void;
}

export function jsonLinesLog(write: (text: string) => void, now: () => number = Date.now): RelayLog {
  const log = (level: string) => (message: string, fields?: Fields) => write(`${JSON.stringify({ time: new Date(now()).toISOString(), level, component: 'relay', message, ...fields })}\n`);
  return { info: log('info'), warn: log('warn'), error: log('error') };
}

/** A log that keeps its lines, for tests. */
export function memoryLog(): RelayLog & { lines: Array<{ level: string; message: string; fields?: Fields }> } {
  const lines: Array<{ level: string; message: string; fields?: Fields }> = [];
  const log = (level: string) => (message: string, fields?: Fields) => void lines.push({ level, message, ...(fields ? { fields } : {}) });
  return { lines, info: log('info'), warn: log('warn'), error: log('error') };
}
