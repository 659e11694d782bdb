/** The would-restart event of a notify-only route: bounded like every event, and read the same by every sink. */
import { describe, expect, it } from 'vitest';
import { eventLines, eventTitle, parseEvent, rotationEvent } from '../../../lib/notify/event.ts';

describe('a would-restart event', () => {
  const targets = Array.from({ length: 25 }, (_, i) => `Deployment ns/app-${String(i).padStart(2, '0')}`);
  const event = rotationEvent(
    {
      kind: 'would-restart',
      rotation: 'r1',
      route: 'watch',
      at: '2026-11-28T12:00:00.000Z',
      secrets: ['secret/watch/app version 2'],
      cluster: 'alpha',
      reason: '25 targets would restart; the route is notify-only, nothing was patched',
      targets,
    },
    'cluster alpha',
  );

  it('lists the first 20 targets and a count of the rest', () => {
    expect(event.targets).toHaveLength(21);
    expect(event.targets?.slice(0, 2)).toEqual(['Deployment ns/app-00', 'Deployment ns/app-01']);
    expect(event.targets?.at(-1)).toBe('… and 5 more');
  });

  it('has its title and a line naming what would restart; it reads back from the outbox', () => {
    expect(eventTitle(event)).toBe('Would restart (notify-only route)');
    expect(eventLines(event)).toContain(`Would restart: ${event.targets?.join(', ')}`);
    expect(parseEvent(JSON.stringify(event))).toEqual(event);
  });

  it('has one id per rotation and cluster, so a redelivery notifies nothing twice', () => {
    const again = rotationEvent({ ...event, at: '2026-11-28T12:05:00.000Z' }, 'cluster alpha');
    const other = rotationEvent({ ...event }, 'cluster beta');
    expect(again.id).toBe(event.id);
    expect(other.id).not.toBe(event.id);
  });
});
