/**
 * The aborts of the durable runs this process is running now, by run id: `abortRun` fires them at
 * once (the run's turn and calls stop as an in-memory run's do), before it records the abort
 * durably for every other process and every later replay.
 */
const running = new Map<string, Set<AbortController>>()

/** Registers a run's controller while its workflow body runs here; returns the unregistration. */
export const registerRun = (runId: string, controller: AbortController): () => void => {
  const set = running.get(runId) ?? new Set()
  set.add(controller)
  running.set(runId, set)
  return () => {
    set.delete(controller)
    if (set.size === 0 && running.get(runId) === set) running.delete(runId)
  }
}

/** Fires the abort of run `runId` if it runs in this process (synchronously). */
export const abortLocally = (runId: string): void => {
  const set = running.get(runId)
  if (set !== undefined) {
    // a copy: an abort may leave the set
    for (const controller of Array.from(set)) controller.abort()
  }
}
