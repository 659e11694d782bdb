import { appendFileSync, renameSync, truncateSync, writeFileSync, copyFileSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileTail } from '../../../lib/relay/file-tail.ts';
import { OffsetStore } from '../../../lib/relay/offset-store.ts';
import { memoryLog } from '../../../lib/relay/relay-log.ts';
import { temporaryDir } from './helpers.ts';

let tmp: ReturnType<typeof temporaryDir>;
let logFile: string;
let storeFile: string;
beforeEach(() => {
  tmp = temporaryDir();
  logFile = join(tmp.dir, 'audit.log');
  storeFile = join(tmp.dir, 'offset.json');
});
afterEach(() => tmp.remove());

/** A tail that acknowledges every line at once (as if its batch were spooled) and never polls on its own. */
function tail(options: { startAt?: 'end' | 'start'; maxLineBytes?: number; rotatedQuietPolls?: number } = {}) {
  const lines: string[] = [];
  const dropped: string[] = [];
  const store = new OffsetStore(storeFile);
  const log = memoryLog();
  const instance = new FileTail({ path: logFile, store, log, pollMs: 60_000, readChunkBytes: 16, onLine: (line, ack) => (lines.push(line), ack()), onDropped: (reason) => dropped.push(reason), ...options });
  return { instance, lines, dropped, store, log };
}

describe('FileTail', () => {
  it('emits only complete lines, holding a partial line until its newline comes', async () => {
    writeFileSync(logFile, '');
    const t = tail({ startAt: 'start' });
    await t.instance.start();
    appendFileSync(logFile, '{"a":1}\n{"b":');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['{"a":1}']);
    appendFileSync(logFile, '2}\n\n');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['{"a":1}', '{"b":2}']);
    await t.instance.stop();
  });

  it('starts at the end of an existing file by default, and at its start when told', async () => {
    writeFileSync(logFile, 'old-1\nold-2\n');
    const fromEnd = tail();
    await fromEnd.instance.start();
    appendFileSync(logFile, 'new-1\n');
    await fromEnd.instance.pollOnce();
    expect(fromEnd.lines).toEqual(['new-1']);
    await fromEnd.instance.stop();
    await fromEnd.store.flush();

    rmSync(storeFile);
    const fromStart = tail({ startAt: 'start' });
    await fromStart.instance.start();
    expect(fromStart.lines).toEqual(['old-1', 'old-2', 'new-1']);
    await fromStart.instance.stop();
  });

  it('follows a rename rotation: drains the old file (Vault writes there until SIGHUP), then reads the new one from its start', async () => {
    writeFileSync(logFile, '');
    const t = tail({ startAt: 'start', rotatedQuietPolls: 2 });
    await t.instance.start();
    appendFileSync(logFile, 'a\nb\n');
    await t.instance.pollOnce();
    renameSync(logFile, `${logFile}.1`);
    appendFileSync(`${logFile}.1`, 'c\n'); // written after the rename, before Vault reopened
    writeFileSync(logFile, 'd\n');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['a', 'b', 'c', 'd']);
    appendFileSync(`${logFile}.1`, 'late\n');
    appendFileSync(logFile, 'e\n');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['a', 'b', 'c', 'd', 'late', 'e']);
    // The old file goes quiet and is closed; an unfinished line at its end is dropped and counted.
    appendFileSync(`${logFile}.1`, 'unfinished');
    for (let i = 0; i < 4; i++) await t.instance.pollOnce();
    expect(t.dropped).toEqual(['partial-line']);
    await t.instance.stop();
  });

  it('follows a copy-truncate rotation: reads the file again from its start', async () => {
    writeFileSync(logFile, '');
    const t = tail({ startAt: 'start' });
    await t.instance.start();
    appendFileSync(logFile, 'one\ntwo\nthree\n');
    await t.instance.pollOnce();
    copyFileSync(logFile, `${logFile}.1`);
    truncateSync(logFile, 0);
    appendFileSync(logFile, 'four\n');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['one', 'two', 'three', 'four']);
    expect(t.log.lines.some((l) => l.message.includes('copy-truncate'))).toBe(true);
    await t.instance.stop();
  });

  it('resumes from the saved offset after a restart, without repeating or skipping lines', async () => {
    writeFileSync(logFile, '');
    const first = tail({ startAt: 'start' });
    await first.instance.start();
    appendFileSync(logFile, '1\n2\n');
    await first.instance.pollOnce();
    await first.instance.stop();
    await first.store.flush();
    expect(JSON.parse(readFileSync(storeFile, 'utf8'))).toMatchObject({ path: logFile, offset: 4 });

    appendFileSync(logFile, '3\n'); // written while the relay was down
    const second = tail();
    await second.instance.start();
    appendFileSync(logFile, '4\n');
    await second.instance.pollOnce();
    expect(second.lines).toEqual(['3', '4']);
    await second.instance.stop();
  });

  it('after a restart, finishes a file that was rotated meanwhile (found by its inode), then reads the new one', async () => {
    writeFileSync(logFile, '');
    const first = tail({ startAt: 'start' });
    await first.instance.start();
    appendFileSync(logFile, '1\n');
    await first.instance.pollOnce();
    await first.instance.stop();
    await first.store.flush();

    appendFileSync(logFile, '2\n');
    renameSync(logFile, `${logFile}-20260101`);
    writeFileSync(logFile, '3\n');
    const second = tail();
    await second.instance.start();
    expect(second.lines).toEqual(['2', '3']);
    await second.instance.stop();
  });

  it('after a restart, reads a file truncated meanwhile from its start, and says when the rotated file is gone', async () => {
    writeFileSync(logFile, '');
    const first = tail({ startAt: 'start' });
    await first.instance.start();
    appendFileSync(logFile, 'long line one\n');
    await first.instance.pollOnce();
    await first.instance.stop();
    await first.store.flush();

    truncateSync(logFile, 0);
    appendFileSync(logFile, 'x\n');
    const second = tail();
    await second.instance.start();
    expect(second.lines).toEqual(['x']);
    await second.instance.stop();
    await second.store.flush();

    rmSync(logFile);
    writeFileSync(logFile, 'fresh\n');
    const third = tail();
    await third.instance.start();
    expect(third.lines).toEqual(['fresh']);
    expect(third.log.lines.some((l) => l.level === 'warn' && l.message.includes('old file is gone'))).toBe(true);
    await third.instance.stop();
  });

  it('waits for a file that does not exist yet, and drops lines longer than the limit', async () => {
    const t = tail({ maxLineBytes: 8 });
    await t.instance.start();
    expect(t.log.lines.some((l) => l.message.includes('does not exist yet'))).toBe(true);
    writeFileSync(logFile, 'short\nthis line is far too long\nok\n');
    await t.instance.pollOnce();
    expect(t.lines).toEqual(['short', 'ok']);
    expect(t.dropped).toEqual(['line-too-long']);
    await t.instance.stop();
  });

  it('polls on its own timer', async () => {
    writeFileSync(logFile, '');
    const lines: string[] = [];
    const instance = new FileTail({ path: logFile, store: new OffsetStore(storeFile), log: memoryLog(), pollMs: 10, onLine: (line) => lines.push(line), onDropped: () => undefined });
    await instance.start();
    appendFileSync(logFile, 'timed\n');
    const until = Date.now() + 2000;
    while (lines.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    expect(lines).toEqual(['timed']);
    await instance.stop();
  });
});
