// Kopf's example 14: daemons. A daemon runs while its object exists and must return once
// `stopped` aborts; `bosun.sleep(seconds, stopped)` is Kopf's `stopped.wait(seconds)`.
import * as bosun from "bosun-operator";

// This daemon exits after 3 failed attempts and then 30 seconds of running (unless stopped).
bosun.daemon("kopfexamples", async ({ stopped, spec, logger, retry, patch }) => {
  if (retry < 3) {
    patch.status.message = `Failed ${retry + 1} times.`;
    throw new bosun.TemporaryError("Simulated failure.", { delay: 1 });
  }
  const started = Date.now();
  while (!stopped.aborted && Date.now() - started <= 30_000) {
    logger.info(`=> Ping from a sync daemon: field='${spec.field}', retry=${retry}`);
    await bosun.sleep(5.0, stopped);
  }
  patch.status.message = "Accompanying is finished.";
}, { id: "background_sync", backoff: 3 });

// This daemon runs until stopped. Yet it fails to start for the first 3 times.
bosun.daemon("kopfexamples", async ({ stopped, spec, logger, retry }) => {
  if (retry < 3) throw new bosun.TemporaryError("Simulated failure.", { delay: 1 });
  while (!stopped.aborted) {
    logger.info(`=> Ping from an async daemon: field='${spec.field}'`);
    await bosun.sleep(5.0, stopped);
  }
}, { id: "background_async", backoff: 3, cancellationTimeout: 1.5, annotations: { someannotation: "somevalue" } });
