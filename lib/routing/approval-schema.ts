/**
 * `rollout.gate.approval`: a gate that also waits for a person. Apart from schema.ts so the field stays one line
 * there; its meaning lives in lib/plan/waves.ts (decideGate) and docs/how-to/approval-gates.md.
 */
import { z } from 'zod';

export const GateApprovalSchema = z
  .boolean()
  .describe(
    'true: once the wave passed the rest of its gate, the next wave also waits until someone runs vault-rollout approve ROTATION --wave N (default false)',
  );
