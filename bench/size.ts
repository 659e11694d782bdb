/**
 * The size a benchmark runs at. `node bench/run.ts --tiny` runs each benchmark with the least work that still goes
 * through all of its code (a round or two, a handful of targets), so a test can prove the benchmarks still run
 * without the minutes a measurement takes; its figures mean nothing and are written elsewhere (`--out`).
 */
export const TINY = process.argv.includes('--tiny');

/** `full` for a measurement, `tiny` under `--tiny`. */
export const size = <T>(full: T, tiny: T): T => (TINY ? tiny : full);
