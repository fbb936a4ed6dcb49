// Work on one key runs one call at a time, in the order asked; calls on different keys run side by side.
// Nothing is kept once a key's last call has settled.

export class OneAtATime {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `fn` once every earlier call on `key` has settled (succeeded or failed). */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.then(fn);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with a call running or waiting. */
  get size(): number {
    return this.tails.size;
  }
}
