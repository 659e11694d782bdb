/** The log-shipper and CloudWatch wrappers around audit lines, and --format restrictions. */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';

const audit = (id: string, version = 2) => ({
  time: '2026-11-20T10:00:00Z',
  type: 'response',
  request: { id, operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/app' },
  response: { data: { version } },
});
const line = (id: string) => JSON.stringify(audit(id));
const cloudwatch = (doc: unknown) =>
  JSON.stringify({ awslogs: { data: gzipSync(JSON.stringify(doc)).toString('base64') } });

describe('transports', () => {
  it('reads Fluent Bit records that are the entry, or carry it under log', () => {
    const body = JSON.stringify([
      { date: 1700000000.1, ...audit('a') },
      { date: 1700000000.2, log: `prefix ${line('b')}` },
    ]);
    const r = parseInput(body, { format: 'fluent-bit' });
    expect(r.changes.map((c) => [c.id, c.via, c.record])).toEqual([
      ['a', 'direct', 'line 1[0]'],
      ['b', 'fluent-bit', 'line 1[1] log'],
    ]);
  });

  it('reads Vector records with the raw line under message, as an array or NDJSON', () => {
    const records = [{ message: line('a'), host: 'vault-0', source_type: 'file' }, { message: line('b') }];
    for (const body of [JSON.stringify(records), records.map((r) => JSON.stringify(r)).join('\n')]) {
      const r = parseInput(body, { format: 'vector' });
      expect(r.changes.map((c) => [c.id, c.via])).toEqual([
        ['a', 'vector'],
        ['b', 'vector'],
      ]);
    }
  });

  it('rejects a shipper line that is not an audit entry or event', () => {
    const r = parseInput(
      JSON.stringify([
        { log: '2026-11-20T10:00:00Z [INFO] core: vault is unsealed' },
        { log: JSON.stringify({ level: 'info' }) },
      ]),
    );
    expect(r.rejected.map((x) => x.record)).toEqual(['line 1[0] log', 'line 1[1] log']);
  });

  it('reads CloudWatch Logs subscription events, one record per log event', () => {
    const r = parseInput(
      cloudwatch({
        messageType: 'DATA_MESSAGE',
        logGroup: '/vault/audit',
        logStream: 'i-1',
        logEvents: [
          { id: '1', timestamp: 1, message: line('a') },
          { id: '2', timestamp: 2, message: 'garbage' },
        ],
      }),
      { format: 'cloudwatch' },
    );
    expect(r.changes.map((c) => [c.id, c.via, c.record])).toEqual([['a', 'cloudwatch', 'line 1 logEvents[0]']]);
    expect(r.rejected.map((x) => x.record)).toEqual(['line 1 logEvents[1]']);
  });

  it('reads decoded CloudWatch data (as the logs function hands it over)', () => {
    const r = parseInput(JSON.stringify({ messageType: 'DATA_MESSAGE', logEvents: [{ message: line('a') }] }));
    expect(r.changes).toHaveLength(1);
  });

  it('ignores a CONTROL_MESSAGE as one record', () => {
    const r = parseInput(
      cloudwatch({
        messageType: 'CONTROL_MESSAGE',
        logGroup: '',
        logStream: '',
        logEvents: [{ id: '', timestamp: 1, message: 'CWL CONTROL MESSAGE: Checking health of destination Firehose.' }],
      }),
    );
    expect(r).toEqual({
      changes: [],
      ignored: [{ record: 'line 1', reason: 'control-message', detail: 'CloudWatch Logs reachability check' }],
      rejected: [],
    });
  });

  it.each([
    ['not base64', { awslogs: { data: '***' } }, 'awslogs.data: not base64'],
    ['not gzip', { awslogs: { data: Buffer.from('plain').toString('base64') } }, 'awslogs.data: not gzip'],
    [
      'not JSON inside',
      { awslogs: { data: gzipSync('nope').toString('base64') } },
      'awslogs.data: the decompressed data is not JSON',
    ],
    [
      'not CloudWatch data inside',
      { awslogs: { data: gzipSync('{"logEvents":3,"messageType":"DATA_MESSAGE"}').toString('base64') } },
      'not CloudWatch Logs data: logEvents: Invalid input: expected array, received number',
    ],
  ])('rejects an envelope that is %s', (_name, envelope, error) => {
    expect(parseInput(JSON.stringify(envelope)).rejected).toEqual([{ record: 'line 1', error }]);
  });

  it('caps what CloudWatch envelopes inflate to, all envelopes of one input together, and says why', () => {
    const MiB = 1024 * 1024;
    // 17 MiB of JSON whitespace compresses to ~17 KB: refused at the 16 MiB cap, never inflated in full.
    const bomb = {
      awslogs: {
        data: gzipSync(
          Buffer.concat([
            Buffer.from('{"messageType":"DATA_MESSAGE","logEvents":[]'),
            Buffer.alloc(17 * MiB, ' '),
            Buffer.from('}'),
          ]),
        ).toString('base64'),
      },
    };
    const error = `awslogs.data: refused, it decompresses past the limit of ${16 * MiB} bytes for all CloudWatch Logs data of one input (a real delivery is far smaller)`;
    expect(parseInput(JSON.stringify(bomb)).rejected).toEqual([{ record: 'line 1', error }]);
    // Three envelopes of 6 MiB each: the first two fit the budget, the third is refused.
    const six = {
      awslogs: {
        data: gzipSync(
          Buffer.concat([
            Buffer.from('{"messageType":"DATA_MESSAGE","logEvents":[]'),
            Buffer.alloc(6 * MiB, ' '),
            Buffer.from('}'),
          ]),
        ).toString('base64'),
      },
    };
    const r = parseInput([six, six, six].map((e) => JSON.stringify(e)).join('\n'));
    expect(r.rejected.map((x) => x.record)).toEqual(['line 3']);
    expect(r.rejected).toEqual([{ record: 'line 3', error }]);
  });

  it('admits only the records its --format names', () => {
    expect(parseInput(line('a'), { format: 'event' }).rejected).toHaveLength(1);
    expect(parseInput(line('a'), { format: 'audit' }).changes).toHaveLength(1);
    expect(parseInput(JSON.stringify({ hello: 1 })).rejected[0]?.error).toBe(
      'not a Vault audit entry, event notification or log-shipper record',
    );
  });
});
