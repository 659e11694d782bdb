/** A counting semaphore: at most `limit` tasks of one cluster in flight, the rest wait in order. */
export class ConcurrencyLimiter {
  #active = 0;
  readonly #waiting: Array<() => void> = [];
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = Math.max(1, limit);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#active < this.#limit) this.#active++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve)); // the finishing task hands its slot over
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#active--;
    }
  }
}
