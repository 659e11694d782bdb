/** Child process of the plan memory benchmark: prints its peak RSS in MB after planning (or only reading) a file. */
import { createReadStream } from 'node:fs';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { parseStream } from '../lib/sources/parse.ts';
import { syntheticRoutes } from './plan-bench.ts';

const [mode, file, routes] = process.argv.slice(2);
// The table's size is the parent's (10,000 routes when measuring, fewer at the tiny size).
const n = Number(routes ?? 10_000);
if (mode === 'plan') {
  const table = loadRoutingTable(syntheticRoutes(n), 'synthetic.yaml');
  const parsed = await parseStream(createReadStream(file ?? ''), { mounts: table.mounts });
  planRollouts(table, parsed.changes);
} else {
  loadRoutingTable(syntheticRoutes(n), 'synthetic.yaml');
  for await (const _chunk of createReadStream(file ?? '')) {
    // read only
  }
}
console.log((process.resourceUsage().maxRSS / 1024).toFixed(1));
