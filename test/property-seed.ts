/**
 * Vitest setup file (unit project): which inputs the property tests draw.
 *
 * Locally every run draws new inputs, which is how the property tests find what no table did. In CI (`CI=true`) the
 * seed is fixed by the commit, so CI and a clean-clone run of the same commit (`CI=true bash .ci/run`) test exactly the
 * same inputs: a commit verified here is the commit CI judges, and a new commit still draws new inputs.
 * `FC_SEED=<n>` replays the seed a failure printed.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

function commitSeed(): number | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return createHash('sha256').update(head).digest().readInt32BE(0);
  } catch {
    return undefined; // not a git checkout: draw at random
  }
}

const seed = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : process.env.CI === 'true' ? commitSeed() : undefined;
if (seed !== undefined && Number.isInteger(seed)) fc.configureGlobal({ seed });
