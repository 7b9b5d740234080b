// The Servicer without the transport: requests in, answers out.
const test = require("node:test");
const assert = require("node:assert/strict");
const { bosun, bytes, json, kex, handleRequest } = require("./helpers");

function servicerWith(register) {
  const registry = new bosun.Registry();
  register(registry);
  return new bosun.Servicer(registry, "test-server");
}

test("a handler's result, patch, log lines and events come back in the answer", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", ({ spec, patch, logger, body }) => {
    patch.status.seen = spec.field;
    logger.info("hello");
    bosun.info(body, { reason: "Said", message: "hi" });
    return { message: "created" };
  }, { id: "create" }));
  const response = await servicer.handle(handleRequest({ handler_id: "create", object: bytes(kex()) }));
  assert.equal(response.outcome, "OUTCOME_SUCCESS");
  assert.deepEqual(json(response.result), { message: "created" });
  assert.deepEqual(json(response.merge_patch), { status: { seen: "value" } });
  assert.deepEqual(response.logs, [{ level: "LEVEL_INFO", message: "hello" }]);
  assert.deepEqual(response.events, [{ type: "Normal", reason: "Said", message: "hi" }]);
});

test("a failed attempt still sends its patch, and its error as the outcome", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", ({ patch, retry }) => {
    patch.status.attempts = retry + 1;
    throw new bosun.TemporaryError("not yet", { delay: 0.5 });
  }, { id: "errors" }));
  const response = await servicer.handle(handleRequest({ handler_id: "errors", object: bytes(kex()), retry: 1 }));
  assert.equal(response.outcome, "OUTCOME_TEMPORARY_ERROR");
  assert.equal(response.message, "not yet");
  assert.equal(response.delay_seconds, 0.5);
  assert.deepEqual(json(response.merge_patch), { status: { attempts: 2 } });
});

test("an unknown handler id is NOT_FOUND naming the known ones", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", () => {}, { id: "create" }));
  await assert.rejects(servicer.handle(handleRequest({ handler_id: "no-such-handler", object: bytes(kex()) })),
    (e) => e.constructor.name === "NoSuchHandler" && e.message === 'handler server "test-server" has no handler "no-such-handler"; it has: create');
});

test("an object that is not JSON is that call's unexpected error", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", () => {}, { id: "create" }));
  const response = await servicer.handle(handleRequest({ handler_id: "create", object: Buffer.from("{broken") }));
  assert.equal(response.outcome, "OUTCOME_UNEXPECTED_ERROR");
  assert.match(response.message, /could not run "create".*not JSON/);
});

test("a return value that is not JSON is an unexpected error", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", () => ({ n: 1n }), { id: "create" }));
  const response = await servicer.handle(handleRequest({ handler_id: "create", object: bytes(kex()) }));
  assert.equal(response.outcome, "OUTCOME_UNEXPECTED_ERROR");
  assert.match(response.message, /return value is not JSON-serialisable/);
});

test("sub-handlers are declared, then called through their parent's code", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", ({ spec, subhandler }) => {
    for (const item of spec.items) subhandler(item, ({ param }) => ({ item, param }), { param: item, retries: 2 });
  }, { id: "subhandlers" }));
  const object = bytes(kex({ items: ["a", "b"] }));
  const parent = await servicer.handle(handleRequest({ handler_id: "subhandlers", object }));
  assert.deepEqual(parent.subhandlers.map((s) => [s.id, json(s.param), s.options.retries]), [["a", "a", 2], ["b", "b", 2]]);
  const child = await servicer.handle(handleRequest({ handler_id: "subhandlers/b", parent_id: "subhandlers", subhandler_id: "b", object, param: bytes("b") }));
  assert.deepEqual(json(child.result), { item: "b", param: "b" });
  const gone = await servicer.handle(handleRequest({ handler_id: "subhandlers/c", parent_id: "subhandlers", subhandler_id: "c", object }));
  assert.equal(gone.outcome, "OUTCOME_PERMANENT_ERROR");
});

test("owned objects are sent with a success", async () => {
  const servicer = servicerWith((r) => r.register("create", "kex", () => {
    bosun.own({ apiVersion: "v1", kind: "ConfigMap", data: { a: "b" } }, { copyLabels: true });
  }, { id: "children" }));
  const response = await servicer.handle(handleRequest({ handler_id: "children", object: bytes(kex()) }));
  assert.deepEqual(response.owned.map((o) => [json(o.object).kind, o.apply, o.copy_labels]), [["ConfigMap", false, true]]);
});

test("a predicate filter that does not hold skips the handler", async () => {
  let called = false;
  const servicer = servicerWith((r) => r.register("create", "kex", () => { called = true; }, { id: "f", labels: { app: (v) => v === "other" } }));
  const response = await servicer.handle(handleRequest({ handler_id: "f", object: bytes(kex()) }));
  assert.equal(response.outcome, "OUTCOME_SKIPPED");
  assert.equal(called, false);
});

test("field handlers get the old and new values; memo persists per object", async () => {
  const servicer = servicerWith((r) => r.register("field", "kex", ({ old, new: value, memo }) => {
    memo.calls = (memo.calls ?? 0) + 1;
    return { old, new: value, calls: memo.calls };
  }, { id: "field", field: "spec.field" }));
  const request = handleRequest({ handler_id: "field/spec.field", reason: "REASON_UPDATE", object: bytes(kex()), old: bytes("a"), new: bytes("b") });
  await servicer.handle(request);
  assert.deepEqual(json((await servicer.handle(request)).result), { old: "a", new: "b", calls: 2 });
});

test("activities answer with their outcome, result and log lines", async () => {
  const servicer = servicerWith((r) => {
    r.register("startup", undefined, ({ retry, logger }) => {
      if (retry === 0) throw new bosun.TemporaryError("not ready", { delay: 0.2 });
      logger.info("ran");
    }, { id: "startup" });
    r.register("probe", undefined, () => ({ alive: true }), { id: "probe" });
  });
  assert.deepEqual(await servicer.activity({ handler_id: "startup", kind: "HANDLER_KIND_STARTUP", retry: 0, handler_key: "" }),
    { outcome: "OUTCOME_TEMPORARY_ERROR", message: "not ready", delay_seconds: 0.2, logs: [] });
  assert.deepEqual(await servicer.activity({ handler_id: "startup", kind: "HANDLER_KIND_STARTUP", retry: 1, handler_key: "" }),
    { outcome: "OUTCOME_SUCCESS", logs: [{ level: "LEVEL_INFO", message: "ran" }] });
  assert.deepEqual(json((await servicer.activity({ handler_id: "probe", kind: "HANDLER_KIND_PROBE", retry: 0, handler_key: "" })).result), { alive: true });
});

test("a daemon streams its lines, runs until stopped, and ends with its exit", async () => {
  const servicer = servicerWith((r) => r.register("daemon", "kex", async ({ stopped, logger, patch }) => {
    logger.info("started");
    while (!(await bosun.sleep(10, stopped)));
    patch.status.done = true;
  }, { id: "daemon" }));
  const messages = [];
  let sawStart;
  const started = new Promise((resolve) => (sawStart = resolve));
  const send = (m) => { messages.push(m); if (m.log) sawStart(); };
  const running = servicer.daemon({ handler_id: "daemon", handler_key: "", object: bytes(kex()), retry: 0, memo: Buffer.alloc(0), resource: null }, send, new AbortController().signal);
  await started;
  assert.deepEqual(servicer.stopDaemon({ handler_id: "daemon", handler_key: "", uid: "uid-1" }), { stopping: true });
  await running;
  assert.deepEqual(messages.map((m) => Object.keys(m)[0]), ["log", "merge_patch", "exit"]);
  assert.deepEqual(messages[2].exit, { outcome: "OUTCOME_SUCCESS", stopped: true });
  assert.deepEqual(servicer.stopDaemon({ handler_id: "daemon", handler_key: "", uid: "uid-1" }), { stopping: false });
});

test("admission handlers allow, deny with AdmissionError, and mutate with their patch", async () => {
  const servicer = servicerWith((r) => {
    r.register("validate", "kex", ({ spec, warnings }) => {
      warnings.push("looked");
      if (spec.field === "wrong") throw new bosun.AdmissionError("Meh!", { code: 555 });
    }, { id: "v" });
    r.register("mutate", "kex", ({ patch }) => { patch.spec.injected = 123; }, { id: "m" });
  });
  const review = (spec) => ({ handler_id: "", handler_key: "", headers: {}, request: bytes({ uid: "r", operation: "CREATE", object: kex(spec) }) });
  assert.deepEqual(await servicer.admit({ ...review({ field: "ok" }), handler_id: "v" }), { allowed: true, warnings: ["looked"] });
  assert.deepEqual(await servicer.admit({ ...review({ field: "wrong" }), handler_id: "v" }), { allowed: false, message: "Meh!", code: 555, warnings: ["looked"] });
  const mutated = await servicer.admit({ ...review({}), handler_id: "m" });
  assert.deepEqual(json(mutated.merge_patch), { spec: { injected: 123 } });
});

test("startup handlers send the settings they changed, and only those", async () => {
  const servicer = servicerWith((r) => {
    r.register("startup", undefined, ({ settings }) => {
      settings.admission.server = {};
      settings.admission.managed = "auto.kopf.dev";
      settings.posting.level = "warning";
      settings.persistence.progressStorage = { kind: "status", field: "status.kopf.progress" };
    }, { id: "config" });
    r.register("startup", undefined, () => {}, { id: "nothing" });
  });
  const response = await servicer.activity({ handler_id: "config", kind: "HANDLER_KIND_STARTUP", retry: 0, handler_key: "" });
  assert.deepEqual(response.settings, {
    admission_managed: "auto.kopf.dev", posting_level: "LEVEL_WARNING",
    progress_storage: { kind: "KIND_STATUS", field: "status.kopf.progress" },
    admission_server: { listen: "", host: "", certfile: "", pkeyfile: "", cafile: "" },
  });
  const nothing = await servicer.activity({ handler_id: "nothing", kind: "HANDLER_KIND_STARTUP", retry: 0, handler_key: "" });
  assert.equal(nothing.settings, undefined);
});

test("index handlers fill their index, which other handlers get; DELETED drops the object", async () => {
  const servicer = servicerWith((r) => {
    r.register("index", "kex", ({ name, labels }) => ({ [labels.app]: name }), { id: "by_app" });
    r.register("create", "kex", ({ indices }) => ({ apps: indices.by_app.get("x") }), { id: "create" });
  });
  const index = (event_type, name) => servicer.handle(handleRequest({ handler_id: "by_app", reason: "REASON_INDEX", event_type, object: bytes(kex(undefined, { metadata: { name, uid: name } })) }));
  await assert.rejects(servicer.handle(handleRequest({ handler_id: "create", object: bytes(kex()) })), (e) => e.constructor.name === "Unavailable");
  servicer.describe();
  await index("", "one");
  await index("ADDED", "two");
  assert.deepEqual(json((await servicer.handle(handleRequest({ handler_id: "create", object: bytes(kex()) }))).result), { apps: ["one", "two"] });
  await index("DELETED", "one");
  assert.deepEqual(json((await servicer.handle(handleRequest({ handler_id: "create", object: bytes(kex()) }))).result), { apps: ["two"] });
});

test("event handlers get the watch event's type", async () => {
  const servicer = servicerWith((r) => r.register("event", "kex", ({ type, event }) => ({ type, same: event.type === type }), { id: "ev" }));
  const response = await servicer.handle(handleRequest({ handler_id: "ev", reason: "REASON_EVENT", event_type: "MODIFIED", object: bytes(kex()) }));
  assert.deepEqual(json(response.result), { type: "MODIFIED", same: true });
});

test("Describe answers the kinds each resource's handlers own, merged per resource", () => {
  const servicer = servicerWith((r) => {
    r.register("create", "kopfexamples", () => {}, { id: "create" });
    r.owns("kopfexamples", "v1/pods");
    r.owns("kopfexamples", "deployments.apps", "v1/pods"); // merged, each kind once
    r.owns({ group: "kopf.dev", version: "v1", plural: "others" }, "configmaps");
  });
  assert.deepEqual(servicer.describe().resources, [
    { resource: { group: "", version: "", name: "kopfexamples" },
      owns: [{ group: "", version: "", name: "v1/pods" }, { group: "", version: "", name: "deployments.apps" }] },
    { resource: { group: "kopf.dev", version: "v1", name: "others" }, owns: [{ group: "", version: "", name: "configmaps" }] },
  ]);
  assert.deepEqual(servicerWith(() => {}).describe().resources, []);
});

test("owns without kinds, or with a kind that names nothing, throws a TypeError", () => {
  const registry = new bosun.Registry();
  assert.throws(() => registry.owns("kopfexamples"), { name: "TypeError", message: "bosun.owns(resource, kind, ...): name at least one owned kind" });
  assert.throws(() => bosun.owns("kopfexamples"), { name: "TypeError", message: /name at least one owned kind/ });
  assert.throws(() => registry.owns("kopfexamples", ""), { name: "TypeError", message: /owned kind is empty/ });
  assert.throws(() => registry.owns("kopfexamples", undefined), { name: "TypeError", message: /not a name/ });
  assert.deepEqual(registry.owned, []);
  assert.deepEqual(bosun.defaultRegistry().owned, []);
});

test("bosun.owns declares into the default registry, which Describe serves", (t) => {
  const registry = bosun.defaultRegistry();
  const before = registry.owned.length;
  t.after(() => registry.owned.splice(before));
  bosun.owns("kopf.dev/v1/kopfexamples", "v1/pods");
  bosun.owns("kopf.dev/v1/kopfexamples", "v1/pods", "v1/services");
  assert.deepEqual(new bosun.Servicer(registry).describe().resources.at(-1), {
    resource: { group: "", version: "", name: "kopf.dev/v1/kopfexamples" },
    owns: [{ group: "", version: "", name: "v1/pods" }, { group: "", version: "", name: "v1/services" }],
  });
});
