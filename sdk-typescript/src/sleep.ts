/** A sleep that a daemon's `stopped` signal cuts short (Kopf's `stopped.wait(seconds)`). */

/** Waits `seconds`, or less when `signal` aborts; resolves to whether it was aborted. */
export function sleep(seconds: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve(!!signal?.aborted);
    };
    const timer = setTimeout(done, Math.max(0, seconds) * 1000);
    signal?.addEventListener("abort", done, { once: true });
  });
}
