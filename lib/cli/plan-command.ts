import { changeSets } from '../plan/cluster-changes.ts';
import { planRollouts } from '../plan/planner.ts';
import { resolveKeyChanges, tableUsesKeys } from '../pipeline/key-changes.ts';
import { planJson, planText } from '../report/plan-report.ts';
import { MemoryKeyBaselineStore } from '../rotations/key-baselines.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadChanges, reportRejected } from './shared.ts';
import { printData } from './output.ts';
import { parseCommand } from './spec.ts';
import { plan as spec } from './specs.ts';

export async function planCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const loaded = await loadChanges(io, 'plan', values);
  if (typeof loaded === 'number') return loaded;
  const { table, parsed } = loaded;
  let plan = planRollouts(table, parsed.changes);
  // Key-level restarts: each write compared with the one before it in this input (a store of this run
  // only, never the state store), so a captured audit log shows which keys each entry changed.
  if (tableUsesKeys(table)) {
    parsed.changes = (
      await resolveKeyChanges(parsed.changes, plan.routed, new MemoryKeyBaselineStore(), Date.now())
    ).changes;
    plan = planRollouts(table, parsed.changes);
  }
  const sets = changeSets(table, parsed.changes, plan);
  printData(
    io,
    values.output,
    () => planJson(parsed, plan, sets),
    () => planText(parsed, plan, sets, table.routes),
  );
  reportRejected(io, 'plan', values.input, parsed);
  return parsed.rejected.length > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
