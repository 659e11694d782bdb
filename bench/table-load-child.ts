/**
 * Child process of the table-load benchmark: loads one routing table file the way named, then prints the time
 * it took and the RSS it added (MB) as one JSON line. `json`: a bare JSON.parse of the file (the baseline);
 * `compiled`: what a function does at a cold start; `yaml`: what it did before `package` compiled the table.
 */
import { readFileSync } from 'node:fs';
import { loadCompiledRoutingTable } from '../lib/routing/compiled-table.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';

const [mode, file = ''] = process.argv.slice(2);
const text = readFileSync(file, 'utf8');
const rssBefore = process.memoryUsage.rss();
const started = performance.now();
const loaded: unknown =
  mode === 'json'
    ? JSON.parse(text)
    : mode === 'compiled'
      ? loadCompiledRoutingTable(text, file)
      : loadRoutingTable(text, file);
const ms = performance.now() - started;
const peakMb = process.resourceUsage().maxRSS / 1024;
process.stdout.write(
  `${JSON.stringify({ ms, addedMb: (process.memoryUsage.rss() - rssBefore) / 2 ** 20, peakMb, kept: loaded !== undefined })}\n`,
);
