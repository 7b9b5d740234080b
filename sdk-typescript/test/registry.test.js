// The registry and Describe: what each registration becomes in the contract.
const test = require("node:test");
const assert = require("node:assert/strict");
const { bosun } = require("./helpers");
const { handlerSpec } = require("../dist/registry.js");

test("a create handler is described with its id, resource and default options", () => {
  const registry = new bosun.Registry();
  registry.register("create", { group: "kopf.dev", version: "v1", plural: "kopfexamples" }, function create_fn() {});
  const spec = handlerSpec(registry.handlers[0]);
  assert.equal(spec.id, "create_fn");
  assert.equal(spec.kind, "HANDLER_KIND_CREATE");
  assert.deepEqual(spec.resource, { group: "kopf.dev", version: "v1", name: "kopfexamples" });
  assert.equal(spec.options.errors, "ERRORS_MODE_TEMPORARY");
  assert.equal(spec.options.retries, undefined);
  assert.equal(spec.filters.has_when, false);
});

test("field handlers append the field to their id, as Kopf does", () => {
  const registry = new bosun.Registry();
  registry.register("field", "kopfexamples", () => {}, { id: "field", field: "spec.field" });
  const spec = handlerSpec(registry.handlers[0]);
  assert.equal(spec.id, "field/spec.field");
  assert.equal(spec.field, "spec.field");
  assert.equal(spec.filters.field, undefined);
});

test("label filters go to the controller, predicates stay in the server", () => {
  const registry = new bosun.Registry();
  registry.register("create", "kex", () => {}, {
    id: "f", labels: { a: "yes", b: bosun.PRESENT, c: bosun.ABSENT, d: (v) => v === "x" }, annotations: { e: "1" },
  });
  const spec = handlerSpec(registry.handlers[0]);
  assert.deepEqual(Buffer.from(spec.filters.labels.a.equals).toString(), '"yes"');
  assert.deepEqual(spec.filters.labels.b, { present: true });
  assert.deepEqual(spec.filters.labels.c, { absent: true });
  assert.equal(spec.filters.labels.d, undefined);
  assert.equal(Buffer.from(spec.filters.annotations.e.equals).toString(), '"1"');
  assert.equal(spec.filters.has_when, true);
});

test("options, timers, daemons and admission handlers carry their settings", () => {
  const registry = new bosun.Registry();
  registry.register("create", "kex", () => {}, { id: "o", retries: 3, backoff: 1.5, timeout: 60, errors: "permanent", callTimeout: 10 });
  registry.register("delete", "kex", () => {}, { id: "d", optional: true });
  registry.register("timer", "kex", () => {}, { id: "t", interval: 0.5, idle: 2, initialDelay: 1, sharp: true });
  registry.register("daemon", "kex", () => {}, { id: "dm", initialDelay: 1, cancellationTimeout: 3, backoff: 2 });
  registry.register("validate", "kex", () => {}, { id: "v", operations: ["CREATE"], subresources: ["*"], failClosed: true });
  const [o, d, t, dm, v] = registry.handlers.map(handlerSpec);
  assert.deepEqual(o.options, { errors: "ERRORS_MODE_PERMANENT", optional: false, deleted: false, retries: 3, backoff_seconds: 1.5, timeout_seconds: 60, call_timeout_seconds: 10 });
  assert.equal(d.options.optional, true);
  assert.deepEqual(t.timer, { interval_seconds: 0.5, idle_seconds: 2, initial_delay_seconds: 1, sharp: true });
  assert.deepEqual(dm.daemon, { initial_delay_seconds: 1, cancellation_timeout_seconds: 3, backoff_seconds: 2 });
  assert.deepEqual(v.admission, { operations: ["CREATE"], subresources: ["*"], side_effects: false, fail_closed: true });
  assert.equal(v.kind, "HANDLER_KIND_VALIDATE");
});

test("registrations the contract cannot carry fail at once", () => {
  const registry = new bosun.Registry();
  assert.throws(() => registry.register("create", "kex", () => {}), /anonymous function needs an id/);
  assert.throws(() => registry.register("field", "kex", () => {}, { id: "f" }), /needs a field/);
  assert.throws(() => registry.register("timer", "kex", () => {}, { id: "t" }), /interval/);
});

test("one id may serve several kinds; keys tell them apart", () => {
  const registry = new bosun.Registry();
  registry.register("create", "kex", () => {}, { id: "fn" });
  registry.register("update", "kex", () => {}, { id: "fn" });
  const [c, u] = registry.handlers;
  assert.notEqual(c.key, u.key);
  assert.equal(registry.find("", "fn", ["update"]), u);
  assert.equal(registry.find(c.key, "fn", ["update"]), c);
});

test("sub-handler calls are routed to their top-level handler, field ids included", () => {
  const registry = new bosun.Registry();
  registry.register("field", "kex", () => {}, { id: "f", field: "spec.x" });
  registry.register("create", "kex", () => {}, { id: "p" });
  const [field, parent] = registry.handlers;
  assert.deepEqual(registry.route("", "f/spec.x"), [field, []]);
  assert.deepEqual(registry.route("", "p/a/b"), [parent, ["a", "b"]]);
  assert.equal(registry.route("", "nope"), undefined);
});

test("bosun.on.* register into the default registry shared across copies", () => {
  const registry = bosun.defaultRegistry();
  registry.clear();
  bosun.on.create("kopfexamples", function create_fn() {});
  bosun.on.field("kopfexamples", () => {}, { id: "f", field: "spec.a" });
  bosun.timer("kopfexamples", () => {}, { id: "t", interval: 1 });
  bosun.on.startup(() => {}, { id: "s" });
  assert.deepEqual(registry.handlers.map((h) => [h.kind, h.id]), [["create", "create_fn"], ["field", "f/spec.a"], ["timer", "t"], ["startup", "s"]]);
  assert.equal(globalThis[Symbol.for("bosun-operator.registry")], registry);
  assert.equal(registry.handlers[3].resource, undefined);
  registry.clear();
});
