// Collects keys added during one turn of the event loop and hands them over together once, at the next
// turn: what changed together (a relist, a scale-down, a burst of watch events) costs one pass, not one each.

export class TickBatch<T> {
  private pending = new Set<T>();
  private scheduled = false;
  private readonly flush: (keys: Set<T>) => void;

  constructor(flush: (keys: Set<T>) => void) {
    this.flush = flush;
  }

  add(key: T): void {
    this.pending.add(key);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const keys = this.pending;
      this.pending = new Set();
      this.flush(keys);
    });
  }
}
