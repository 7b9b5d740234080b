// bosun-operator/testing, in-process: handlers called through the Servicer, no controller.
const test = require("node:test");
const assert = require("node:assert/strict");
const { bosun, kex } = require("./helpers");
const testing = require("../dist/testing/index.js");

function registryWith(register) {
  const registry = new bosun.Registry();
  register(registry);
  return registry;
}

test("the package exports testing, also as the subpath bosun-operator/testing", () => {
  assert.equal(bosun.testing.call, testing.call);
  assert.equal(require("bosun-operator/testing").Runner, testing.Runner);
});

test("success: the result, the patch, log lines and events, by id or by function", async () => {
  function create_fn({ spec, patch, logger, body }) {
    patch.status.seen = spec.field;
    logger.info(`creating with ${spec.field}`);
    bosun.info(body, { reason: "Said", message: "hi" });
    return { message: "hello world" };
  }
  const registry = registryWith((r) => r.register("create", "kopfexamples", create_fn));
  for (const ref of ["create_fn", create_fn]) {
    const got = await testing.call(ref, { body: kex() }, { registry });
    assert.equal(got.outcome, "success");
    assert.equal(got.message, "");
    assert.equal(got.delay, undefined);
    assert.deepEqual(got.result, { message: "hello world" });
    assert.deepEqual(got.patch, { status: { seen: "value" } });
    assert.deepEqual(got.logs, [{ level: "info", message: "creating with value" }]);
    assert.deepEqual(got.events, [{ type: "Normal", reason: "Said", message: "hi" }]);
  }
});

test("the default registry is the one bosun.on.* registers into", async (t) => {
  const fn = bosun.on.create("kopfexamples", () => "ok", { id: "testing_default_registry" });
  t.after(() => {
    const handlers = bosun.defaultRegistry().handlers;
    handlers.splice(handlers.findIndex((h) => h.fn === fn), 1);
  });
  assert.equal((await testing.call("testing_default_registry")).result, "ok");
});

test("the call's kwargs: reason, retry, old/new, diff, started, param, and a JSON copy of the body", async () => {
  let seen;
  const body = kex();
  const registry = registryWith((r) => r.register("update", "kex", (kwargs) => {
    seen = kwargs;
    kwargs.body.spec.field = "changed by the handler";
  }, { id: "update_fn" }));
  const started = new Date(Date.now() - 5000);
  await testing.call("update_fn", {
    body, retry: 2, old: { spec: { field: "a" } }, new: { spec: { field: "b" } }, started, param: { p: 1 },
    diff: [{ op: "change", path: ["spec", "field"], old: "a", new: "b" }],
  }, { registry });
  assert.equal(seen.reason, "update");
  assert.equal(seen.retry, 2);
  assert.deepEqual([seen.old, seen.new], [{ spec: { field: "a" } }, { spec: { field: "b" } }]);
  assert.deepEqual(seen.diff, [{ op: "change", path: ["spec", "field"], old: "a", new: "b" }]);
  assert.equal(seen.started.getTime(), started.getTime());
  assert.ok(seen.runtime >= 5, `runtime ${seen.runtime}`);
  assert.deepEqual(seen.param, { p: 1 });
  assert.deepEqual([seen.name, seen.namespace, seen.uid], ["obj", "default", "uid-1"]);
  assert.equal(body.spec.field, "value", "the handler got a copy, as over the wire");
});

test("TemporaryError: the outcome, its message, its delay and the patch made before it", async () => {
  const registry = registryWith((r) => r.register("create", "kex", ({ patch, retry }) => {
    patch.status.attempts = retry + 1;
    throw new bosun.TemporaryError("not yet", { delay: 10 });
  }, { id: "retrying" }));
  const got = await testing.call("retrying", { body: kex(), retry: 1 }, { registry });
  assert.deepEqual([got.outcome, got.message, got.delay], ["temporary", "not yet", 10]);
  assert.deepEqual(got.patch, { status: { attempts: 2 } });
  assert.equal(got.result, undefined);
});

test("PermanentError: permanent, with its message", async () => {
  const registry = registryWith((r) => r.register("create", "kex", () => {
    throw new bosun.PermanentError("Fail once and for all.");
  }, { id: "failing" }));
  const got = await testing.call("failing", { body: kex() }, { registry });
  assert.deepEqual([got.outcome, got.message, got.delay], ["permanent", "Fail once and for all.", undefined]);
});

test("a thrown Error is unexpected, with its stack as the message", async () => {
  const registry = registryWith((r) => r.register("create", "kex", function broken() {
    throw new Error("An error that is supposed to be recoverable.");
  }));
  const got = await testing.call("broken", { body: kex() }, { registry });
  assert.equal(got.outcome, "unexpected");
  assert.match(got.message, /^Error: An error that is supposed to be recoverable\.\n\s+at broken \(/);
});

test("an unknown handler id, or a function not registered, is a clear error", async () => {
  const registry = registryWith((r) => r.register("create", "kex", () => {}, { id: "create_fn" }));
  await assert.rejects(testing.call("no_such_fn", {}, { registry }),
    { message: 'bosun testing: no handler with the id "no_such_fn" in the registry; it has: create_fn (create)' });
  await assert.rejects(testing.call(function stray() {}, {}, { registry }), /no handler with the function "stray" in the registry; it has: create_fn \(create\)/);
  await assert.rejects(testing.call("create_fn", { reason: "created" }, { registry }), /unknown reason "created"; one of: create, update/);
  await assert.rejects(testing.call("create_fn", { body: { n: 1n } }, { registry }), /the body is not JSON-serialisable/);
});

test("predicate filters skip; sub-handlers are declared, then called as parent/child", async () => {
  const registry = registryWith((r) => {
    r.register("create", "kex", () => "no", { id: "filtered", labels: { app: (v) => v === "other" } });
    r.register("create", "kex", ({ spec, subhandler }) => {
      for (const item of spec.items) subhandler(item, ({ param }) => ({ done: param }), { param: item });
    }, { id: "parent" });
  });
  assert.equal((await testing.call("filtered", { body: kex() }, { registry })).outcome, "skipped");
  const body = kex({ items: ["a", "b"] });
  const parent = await testing.call("parent", { body }, { registry });
  assert.deepEqual(parent.subhandlers, [{ id: "a", param: "a" }, { id: "b", param: "b" }]);
  assert.deepEqual((await testing.call("parent/b", { body, param: "b" }, { registry })).result, { done: "b" });
});

test("one function under several kinds: the reason picks the handler", async () => {
  const both = ({ reason }) => reason;
  const registry = registryWith((r) => {
    r.register("create", "kex", both, { id: "both" });
    r.register("update", "kex", both, { id: "both" });
  });
  assert.equal((await testing.call(both, {}, { registry })).result, "create");
  assert.equal((await testing.call("both", { reason: "update" }, { registry })).result, "update");
});

test("a Harness keeps each object's memo between calls", async () => {
  const registry = registryWith((r) => r.register("create", "kex", ({ memo }) => (memo.n = (memo.n ?? 0) + 1), { id: "count" }));
  const harness = new testing.Harness(registry);
  await harness.call("count", { body: kex() });
  assert.equal((await testing.call("count", { body: kex() }, { harness })).result, 2);
  assert.equal((await testing.call("count", { body: kex() }, { registry })).result, 1, "a fresh harness per call by default");
});

test("activities: startup with its settings, probe with its result", async () => {
  const registry = registryWith((r) => {
    r.register("startup", undefined, ({ settings, retry }) => {
      if (retry === 0) throw new bosun.TemporaryError("not ready", { delay: 1 });
      settings.posting.level = "warning";
    }, { id: "startup_fn" });
    r.register("probe", undefined, () => ({ alive: true }), { id: "probe_fn" });
  });
  assert.deepEqual((await testing.call("startup_fn", {}, { registry })).delay, 1);
  const started = await testing.activity("startup_fn", { retry: 1 }, { registry });
  assert.equal(started.outcome, "success");
  assert.deepEqual(started.settings, { posting_level: "LEVEL_WARNING" });
  assert.deepEqual((await testing.activity("probe_fn", {}, { registry })).result, { alive: true });
});

test("admission: deny with AdmissionError, mutate with a patch and warnings", async () => {
  const registry = registryWith((r) => {
    r.register("validate", "kex", ({ spec }) => {
      if (spec.field === "wrong") throw new bosun.AdmissionError("Meh!", { code: 403 });
    }, { id: "validate1" });
    r.register("mutate", "kex", ({ patch, warnings }) => {
      patch.spec.injected = 123;
      warnings.push("mutated");
    }, { id: "mutate1" });
  });
  assert.deepEqual(await testing.admit("validate1", { object: kex({ field: "wrong" }) }, { registry }),
    { allowed: false, message: "Meh!", code: 403, patch: undefined, warnings: [] });
  assert.equal((await testing.admit("validate1", { object: kex() }, { registry })).allowed, true);
  assert.deepEqual(await testing.admit("mutate1", { object: kex() }, { registry }),
    { allowed: true, message: "", code: undefined, patch: { spec: { injected: 123 } }, warnings: ["mutated"] });
  await assert.rejects(testing.call("validate1", {}, { registry }), /"validate1" is a validate handler: use testing.admit\(\)/);
});

test("a daemon logs as it runs, stops when asked, and ends with its patch", async () => {
  const registry = registryWith((r) => r.register("daemon", "kex", async ({ stopped, logger, patch }) => {
    logger.info("started");
    await new Promise((resolve) => stopped.addEventListener("abort", resolve, { once: true }));
    patch.status.stopped = true;
  }, { id: "daemon_fn" }));
  const run = testing.daemon("daemon_fn", { body: kex() }, { registry });
  await run.waitFor("started");
  assert.equal(run.stop(), true);
  assert.deepEqual(await run.exit, { outcome: "success", message: "", delay: undefined, stopped: true, patch: { status: { stopped: true } } });
});

test("a daemon stops when its AbortSignal is aborted; a failing one ends with its error", async () => {
  const registry = registryWith((r) => {
    r.register("daemon", "kex", ({ stopped }) => new Promise((resolve) => stopped.addEventListener("abort", resolve)), { id: "waits" });
    r.register("daemon", "kex", () => { throw new bosun.TemporaryError("Simulated failure.", { delay: 3 }); }, { id: "fails" });
  });
  const controller = new AbortController();
  const run = testing.daemon("waits", { body: kex(), signal: controller.signal }, { registry });
  controller.abort();
  assert.equal((await run.exit).stopped, true);
  const failed = await testing.daemon("fails", { body: kex() }, { registry }).exit;
  assert.deepEqual([failed.outcome, failed.message, failed.delay, failed.stopped], ["temporary", "Simulated failure.", 3, false]);
  await assert.rejects(testing.daemon("fails", { body: kex() }, { registry }).waitFor("never"), /the daemon ended before logging never/);
});
