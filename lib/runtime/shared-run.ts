// One run of a read-only probe serves every caller that asked while it was waiting to start: callers that
// arrive together share one run, and a caller never gets the result of a run that started before it
// asked (what it must see may have happened just before its call). At most one run is under way and one
// waits; nothing is kept once the last run has settled.

export class SharedRun<T> {
  private running: Promise<T> | undefined;
  private waiting: Promise<T> | undefined;

  private readonly probe: () => Promise<T>;

  constructor(probe: () => Promise<T>) {
    this.probe = probe;
  }

  get(): Promise<T> {
    if (this.waiting) return this.waiting;
    if (!this.running) return this.start();
    // The run under way may have started before this call: this call and those after it until the run
    // ends share the next one.
    const after = this.running.then(
      () => undefined,
      () => undefined,
    );
    this.waiting = after.then(() => {
      this.waiting = undefined;
      return this.start();
    });
    return this.waiting;
  }

  private start(): Promise<T> {
    const run = this.probe();
    this.running = run;
    const clear = () => {
      if (this.running === run) this.running = undefined;
    };
    run.then(clear, clear);
    return run;
  }
}
