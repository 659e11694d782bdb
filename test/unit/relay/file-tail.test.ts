import { appendFileSync, renameSync, truncateSync, writeFileSync, copyFileSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileTail } from '../../../lib/relay/file-tail.ts';
import { OffsetStore } from '../../../lib/relay/offset-store.ts';
import { memoryLog } from '../../../lib/kernel/log.ts';
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
  const instance = new FileTail({
    path: logFile,
    store,
    log,
    pollMs: 60_000,
    readChunkBytes: 16,
    onLine: (line, ack) => (lines.push(line), ack()),
    onDropped: (reason) => dropped.push(reason),
    ...options,
  });
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
    const instance = new FileTail({
      path: logFile,
      store: new OffsetStore(storeFile),
      log: memoryLog(),
      pollMs: 10,
      onLine: (line) => lines.push(line),
      onDropped: () => undefined,
    });
    await instance.start();
    appendFileSync(logFile, 'timed\n');
    const until = Date.now() + 2000;
    while (lines.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    expect(lines).toEqual(['timed']);
    await instance.stop();
  });

  it('follows by filesystem notifications: a write is read without any poll or sweep', async () => {
    writeFileSync(logFile, '');
    const lines: string[] = [];
    const log = memoryLog();
    const instance = new FileTail({
      path: logFile,
      store: new OffsetStore(storeFile),
      log,
      pollMs: 60_000,
      sweepMs: 60_000,
      onLine: (line) => lines.push(line),
      onDropped: () => undefined,
    });
    await instance.start();
    expect(instance.watching).toBe(true);
    expect(log.lines.some((l) => l.message.includes('by filesystem notifications'))).toBe(true);
    appendFileSync(logFile, 'notified\n');
    const until = Date.now() + 5000;
    while (lines.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    expect(lines).toEqual(['notified']);
    await instance.stop();
  });

  it('falls back to polling, and says so, where the filesystem gives no notifications', async () => {
    const missingDir = join(tmp.dir, 'not-there-yet', 'audit.log');
    const log = memoryLog();
    const instance = new FileTail({
      path: missingDir,
      store: new OffsetStore(storeFile),
      log,
      pollMs: 60_000,
      onLine: () => undefined,
      onDropped: () => undefined,
    });
    await instance.start();
    expect(instance.watching).toBe(false);
    expect(log.lines.some((l) => l.level === 'warn' && l.message.includes('polling it instead'))).toBe(true);
    await instance.stop();
  });

  it('reads 10,000 lines appended across 5 rotations (3 renames, 2 copy-truncates) exactly once each, in order', async () => {
    writeFileSync(logFile, '');
    const lines: string[] = [];
    const dropped: string[] = [];
    const store = new OffsetStore(storeFile);
    // Notifications only: the sweep never runs during the test, so every line is read because a notification came.
    const instance = new FileTail({
      path: logFile,
      store,
      log: memoryLog(),
      pollMs: 60_000,
      sweepMs: 60_000,
      readChunkBytes: 4096,
      onLine: (line, ack) => (lines.push(line), ack()),
      onDropped: (reason) => dropped.push(reason),
      startAt: 'start',
    });
    await instance.start();
    expect(instance.watching).toBe(true);
    const TOTAL = 10_000;
    const ROTATIONS = ['rename', 'copy-truncate', 'rename', 'copy-truncate', 'rename'] as const;
    const perSegment = TOTAL / (ROTATIONS.length + 1);
    const lineText = (n: number) => `{"n":${n},"pad":"${'x'.repeat(n % 50)}"}`;
    let written = 0;
    for (let segment = 0; segment <= ROTATIONS.length; segment++) {
      const end = segment === ROTATIONS.length ? TOTAL : Math.round(perSegment * (segment + 1));
      while (written < end) {
        // Bursts of up to 97 lines, each a whole write, with the event loop turning between them.
        const burst = Math.min(97, end - written);
        appendFileSync(logFile, Array.from({ length: burst }, (_, i) => `${lineText(written + i)}\n`).join(''));
        written += burst;
        await new Promise((r) => setImmediate(r));
      }
      const rotation = ROTATIONS[segment];
      if (rotation === undefined) break;
      // Rotations are minutes apart in life, so the tail has found the file before it is rotated: wait for one line
      // of this segment (a copy-truncate of a file the tail never opened is lost to any follower). It need not
      // have caught up: what it has not read yet is in the renamed file or the copy.
      const first = Math.round(perSegment * segment);
      while (!lines.includes(lineText(first))) await new Promise((r) => setTimeout(r, 1));
      if (rotation === 'rename') renameSync(logFile, `${logFile}.${segment + 1}`);
      else {
        copyFileSync(logFile, `${logFile}.${segment + 1}`);
        truncateSync(logFile, 0);
      }
    }
    const until = Date.now() + 20_000;
    while (lines.length < TOTAL && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    await instance.pollOnce(); // anything more would be a doubled line
    await instance.stop();
    expect(dropped).toEqual([]);
    const seen = lines.map((l) => (JSON.parse(l) as { n: number }).n);
    const missing = Array.from({ length: TOTAL }, (_, i) => i).filter((n) => !seen.includes(n));
    expect({ count: lines.length, missing: missing.slice(0, 5), missingCount: missing.length }).toEqual({
      count: TOTAL,
      missing: [],
      missingCount: 0,
    });
    expect(lines.map((l) => (JSON.parse(l) as { n: number }).n)).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
  }, 30_000);
});
