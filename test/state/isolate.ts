/**
 * Vitest setup file (every project, every worker): the state every CLI command keeps by default under
 * $XDG_STATE_HOME/vault-rollout (serve's queue, the rotation store with its halts) goes to a fresh directory of this
 * worker, never to the user's own ~/.local/state — a halt recorded by one test run must not hold the next one.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

process.env.XDG_STATE_HOME = mkdtempSync(join(tmpdir(), 'vault-rollout-test-state-'));
