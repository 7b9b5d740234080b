/**
 * The TypeScript SDK's conformance server: exactly the handler set of
 * tests/conformance/README.md, registered with `bosun-operator` as its users would. Serve it with
 *
 *     BOSUN_LISTEN=127.0.0.1:50051 node sdk-typescript/dist/cli.js tests/conformance/typescript/server.ts
 *
 * The scenarios in tests/tests/conformance.rs run the real controller against it, as against
 * the Rust and Python SDKs' servers, and expect the same outcomes. Every handler's behaviour is
 * driven by the handled object's spec; handlers whose spec key is absent do nothing.
 */
import { writeSync } from "node:fs";

import * as bosun from "bosun-operator";

const KEX = { group: "kopf.dev", version: "v1", plural: "kopfexamples" };
const TIMER_LABEL = "conformance.bosun.dev/timer";
const DAEMON_LABEL = "conformance.bosun.dev/daemon";
const SILENT_LABEL = "conformance.bosun.dev/silent";
const PATCHER_LABEL = "conformance.bosun.dev/patcher";
const BEAT = 0.1; // the patching daemon's beat, in seconds
const RETRY_DELAY = 0.5; // the errors handler's temporary delay and backoff, in seconds

/** The `retry` at which the startup activity succeeded in this process; null before. */
let startupRetry: number | null = null;
/** The timer's calls so far, per object uid. */
const ticks = new Map<string, number>();

bosun.on.startup(({ retry, logger }) => {
  if (retry === 0) throw new bosun.TemporaryError("conformance: startup not ready at retry 0", { delay: 0.2 });
  startupRetry = retry;
  logger.info("conformance: startup ran");
}, { id: "startup" });

bosun.on.probe(() => ({ alive: true }), { id: "probe" });

bosun.on.cleanup(({ logger }) => {
  logger.info("conformance: cleanup ran");
}, { id: "cleanup" });

bosun.on.create(KEX, ({ spec }) => ({ message: "created", field: spec.field ?? null, startup: startupRetry }), { id: "create" });

bosun.on.update(KEX, ({ spec }) => ({ message: "updated", field: spec.field ?? null }), { id: "update" });

bosun.on.field(KEX, ({ old, new: value }) => ({ old: old ?? null, new: value ?? null }), { id: "field", field: "spec.field" });

bosun.on.resume(KEX, () => ({ message: "resumed" }), { id: "resume" });

bosun.on.delete(KEX, ({ body, name }) => {
  bosun.info(body, { reason: "Deleting", message: `conformance: deleting ${name}` });
}, { id: "delete" });

/** Fails as `spec.fail` says until `spec.retriesBeforeSuccess` attempts failed. */
bosun.on.create(KEX, ({ spec, retry, patch }) => {
  const fail = spec.fail;
  if (fail === undefined || fail === null) return undefined;
  patch.status.attempts = retry + 1;
  const failing = retry < (spec.retriesBeforeSuccess ?? 2);
  if (fail === "permanent") throw new bosun.PermanentError("conformance: permanent failure");
  if (fail === "temporary" && failing) throw new bosun.TemporaryError(`conformance: temporary failure at retry ${retry}`, { delay: RETRY_DELAY });
  if (fail === "unexpected" && failing) throw new Error(`conformance: unexpected failure at retry ${retry}`);
  if (fail === "temporary" || fail === "unexpected") return { retry };
  throw new bosun.PermanentError(`conformance: unknown spec.fail ${JSON.stringify(fail)}`);
}, { id: "errors", backoff: RETRY_DELAY });

/** Applies `spec.patch` as its merge patch, with a null for each label of `spec.removeLabels`. */
bosun.on.create(KEX, ({ spec, patch }) => {
  if (typeof spec.patch === "object" && spec.patch !== null && !Array.isArray(spec.patch)) {
    Object.assign(patch, structuredClone(spec.patch));
  }
  for (const key of spec.removeLabels ?? []) patch.metadata.labels[key] = null;
}, { id: "patch" });

/** Posts every event of `spec.events` about the object. */
bosun.on.create(KEX, ({ spec, body }) => {
  for (const event of spec.events ?? []) {
    bosun.event(body, { type: event.type ?? "", reason: event.reason ?? "", message: event.message ?? "" });
  }
}, { id: "events" });

/** Has the controller create and adopt a ConfigMap with `spec.child` as its data. */
bosun.on.create(KEX, ({ spec }) => {
  if (!("child" in spec)) return undefined;
  bosun.own({ apiVersion: "v1", kind: "ConfigMap", data: spec.child }, { copyLabels: true });
  return { message: "child requested" };
}, { id: "children" });

/** Declares one sub-handler per item of `spec.items`. */
bosun.on.create(KEX, ({ spec, subhandler }) => {
  for (const item of spec.items ?? []) {
    if (typeof item === "string") subhandler(item, () => ({ item }), { param: item });
  }
}, { id: "subhandlers" });

/** Counts its calls per object in the process and patches the count into `status.ticks`. */
bosun.timer(KEX, ({ uid, patch }) => {
  const count = (ticks.get(uid ?? "") ?? 0) + 1;
  ticks.set(uid ?? "", count);
  patch.status.ticks = count;
}, { id: "timer", interval: 0.5, labels: { [TIMER_LABEL]: "yes" } });

/** Says it started (a log line and an event), waits to be stopped, and says so on stdout. */
bosun.daemon(KEX, async ({ stopped, body, namespace, name, logger }) => {
  logger.info("conformance: daemon started");
  bosun.info(body, { reason: "DaemonStarted", message: "conformance: daemon started" });
  while (!(await bosun.sleep(0.5, stopped))) {
    // Waiting for the stop signal.
  }
  process.stdout.write(`conformance: daemon stopped for ${namespace}/${name}\n`);
}, { id: "daemon", labels: { [DAEMON_LABEL]: "yes" } });

/** Sends nothing while it runs (it says so on stdout only), and takes 1 s to wind down once
 * stopped: the controller must wait for it all the same. */
bosun.daemon(KEX, async ({ stopped, namespace, name }) => {
  process.stdout.write(`conformance: silent daemon started for ${namespace}/${name}\n`);
  while (!(await bosun.sleep(0.5, stopped))) {
    // Waiting for the stop signal.
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));
  process.stdout.write(`conformance: silent daemon stopped for ${namespace}/${name}\n`);
}, { id: "silent", labels: { [SILENT_LABEL]: "yes" } });

/** Patches its beat count every 100 ms while it runs, and once more when stopped, as it ends
 * (the TypeScript SDK sends a daemon's patch when it exits: the last count, with the end). */
bosun.daemon(KEX, async ({ stopped, patch, namespace, name }) => {
  process.stdout.write(`conformance: patcher started for ${namespace}/${name}\n`);
  let beats = 0;
  while (!(await bosun.sleep(BEAT, stopped))) {
    beats += 1;
    patch.status.beats = beats;
  }
  patch.status.patcher = "stopped";
  process.stdout.write(`conformance: patcher stopped for ${namespace}/${name}\n`);
}, { id: "patcher", labels: { [PATCHER_LABEL]: "yes" } });

/** On its first call for an object with `spec.crash`, ends its own server at once (as an OOM
 * kill or a segfault would: no answer, no cleanup); answers on the next call. */
bosun.on.create(KEX, ({ spec, retry }) => {
  if (!spec.crash) return undefined;
  if (retry === 0) {
    writeSync(1, "conformance: crashing\n");
    process.exit(3);
  }
  return { retry };
}, { id: "crash", backoff: RETRY_DELAY });

/** Registered only with `CONFORMANCE_EXTRA` set (a server started again with a changed registry). */
if (process.env.CONFORMANCE_EXTRA) {
  bosun.on.create(KEX, () => ({ message: "extra" }), { id: "extra" });
}
