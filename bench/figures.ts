/** What every benchmark reports: a figure with its goal and, where there is one, the baseline measured beside it. */
export interface Figure {
  name: string;
  value: number;
  unit: string;
  /** e.g. "<= 20" */
  goal?: string;
  met?: boolean;
  baseline?: { name: string; value: number };
  /** Spread over the repetitions: [min, max]. */
  spread?: [number, number];
  runs?: number;
  note?: string;
}

export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? 0;
}

export const round = (v: number, digits = 2): number => Number(v.toFixed(digits));
