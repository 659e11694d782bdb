/**
 * `status` when it could read no cluster, or not all: the verdict and the page's title name the clusters it could
 * not read, instead of "no routed path is recorded" (which reads as "nothing to do").
 */
import { describe, expect, it } from 'vitest';
import { renderStatusPage } from '../../../lib/report/status-page.ts';
import { statusText } from '../../../lib/report/status-report.ts';
import type { FleetStatus } from '../../../lib/status/fleet-status.ts';

const unreadable = (clusters: string[]): FleetStatus => ({
  paths: [],
  unreadable: clusters.flatMap((cluster) => [
    { cluster, error: 'connect ECONNREFUSED 127.0.0.1:6443' },
    { cluster, error: 'connect ECONNREFUSED 127.0.0.1:6443' },
  ]),
  notes: [],
  ok: false,
});
const page = (s: FleetStatus): string =>
  renderStatusPage({
    status: { ...s, halts: [] },
    rotations: new Map(),
    store: { name: 'SQLite file rotations.sqlite' },
    generatedAt: Date.parse('2026-11-28T12:00:00Z'),
    refreshSeconds: 0,
  });

describe('status names the clusters it could not read', () => {
  it.each([
    [['alpha'], 'cannot read cluster alpha'],
    [['beta', 'alpha'], 'cannot read 2 clusters: alpha, beta'],
  ])('%j: the text output and its verdict', (clusters, words) => {
    const text = statusText(unreadable(clusters));
    expect(text).toContain(`No routed path could be read: ${words}.\n`);
    expect(text).not.toContain('No routed path is recorded');
    expect(text.trimEnd().split('\n').at(-1)).toMatch(
      new RegExp(`Not yet: ${words}, so what runs there is not known\\.$`),
    );
  });

  it('the page: its title, its verdict and its paths section', () => {
    const html = page(unreadable(['beta', 'alpha']));
    expect(html).toContain('<title>cannot read 2 clusters: alpha, beta · vault-rollout status</title>');
    expect(html).toContain(
      'NOT YET SAFE TO REVOKE</span>: cannot read 2 clusters: alpha, beta, so what runs there is not known.',
    );
    expect(html).toContain('<p>No routed path could be read: cannot read 2 clusters: alpha, beta.</p>');
  });
});
