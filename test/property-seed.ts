/**
 * Vitest setup file (unit project): which inputs the property tests draw.
 *
 * Locally every run draws new inputs, which is how the property tests find what no table did. In CI (`CI=true`)
 * vitest.config.ts fixes the seed by the commit, once for the run, so CI and a clean-clone run of the same commit
 * (`CI=true bash .ci/run`) test exactly the same inputs: a commit verified here is the commit CI judges, and a new
 * commit still draws new inputs. `FC_SEED=<n>` replays the seed a failure printed.
 */
import fc from 'fast-check';

const seed = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
if (seed !== undefined && Number.isInteger(seed)) fc.configureGlobal({ seed });
