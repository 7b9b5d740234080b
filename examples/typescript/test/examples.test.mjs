// Kopf's examples 01, 02, 03, 14 and 17 in TypeScript, end to end: each runs under `bosun dev`
// with examples/crd.yaml (and examples/obj.yaml) applied, and the test waits for what the
// Python examples' tests (examples/python/test_examples.py, examples/tests/*.rs) expect.
import test from "node:test";
import assert from "node:assert/strict";
import { Dev, OBJECT, requireTools } from "./bosun-dev.mjs";

const KEX = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";

async function run(t, example, body, options) {
  if (!requireTools(t)) return;
  const dev = new Dev(example, options);
  try {
    await body(dev);
  } finally {
    const exit = await dev.stop();
    t.diagnostic(`bosun exited with ${JSON.stringify(exit)}`);
  }
  return dev;
}

test("01-minimal: the handler's result becomes the status", (t) => run(t, "01-minimal", async (dev) => {
  await dev.waitFor(`${OBJECT} Handler 'create_fn' succeeded.`);
  await dev.waitFor(`${OBJECT} Creation is processed: 1 succeeded; 0 failed.`);
  assert.equal(dev.count('And here we are! Creating: {"duration":"1m","field":"value"'), 1);
  const obj = await dev.waitGet("the status", `${KEX}/kopf-example-1`, (r) => r.body?.status?.create_fn);
  assert.deepEqual(obj.body.status.create_fn, { message: "hello world" });
}));

test("02-children: an owned pod is created, adopted and listed in the status", (t) => run(t, "02-children", async (dev) => {
  await dev.waitFor(`${OBJECT} Creation is processed: 1 succeeded; 0 failed.`);
  const pod = (await dev.api("GET", "/api/v1/namespaces/default/pods/kopf-example-1-pod")).body;
  const owner = (await dev.api("GET", `${KEX}/kopf-example-1`)).body;
  assert.deepEqual(owner.status.create_fn, { children: [pod.metadata.uid] });
  assert.equal(pod.metadata.ownerReferences.length, 1);
  assert.equal(pod.metadata.ownerReferences[0].uid, owner.metadata.uid);
  assert.equal(pod.metadata.labels.somelabel, "somevalue", "the owner's labels are copied");
  assert.deepEqual(pod.spec.containers[0].env, [{ name: "FIELD", value: "value" }]);
  assert.equal(dev.count("Adding the finalizer"), 0, "no delete handler, no finalizer");
  await dev.api("DELETE", `${KEX}/kopf-example-1`);
  await dev.waitGet("the child pod to be garbage-collected", "/api/v1/namespaces/default/pods/kopf-example-1-pod", (r) => r.status === 404);
}));

test("03-exceptions: errors retry and fail as Kopf's do", (t) => run(t, "03-exceptions", async (dev) => {
  await dev.waitFor(`${OBJECT} Creation is processed: 1 succeeded; 3 failed.`);
  assert.equal(dev.count("Handler 'instant_failure_with_only_a_message' failed permanently: Fail once and for all."), 1);
  assert.equal(dev.count("Handler 'eventual_success_with_a_few_messages' failed temporarily: Expected recoverable error."), 3);
  assert.equal(dev.count("Handler 'eventual_success_with_a_few_messages' succeeded."), 1);
  assert.equal(dev.count("Handler 'eventual_failure_with_tracebacks' failed with an exception. Will retry."), 3);
  assert.equal(dev.count("Handler 'eventual_failure_with_tracebacks' failed permanently: Handler 'eventual_failure_with_tracebacks' has exceeded 3 retries."), 1);
  assert.equal(dev.count("Handler 'instant_failure_with_traceback' failed permanently: Error: An error that is supposed to be recoverable."), 1);
  assert.ok(dev.count("    at ") > 0, "unexpected errors come with their stack");
}));

test("14-daemons: daemons fail, restart, ping and stop with the controller", (t) => run(t, "14-daemons", async (dev) => {
  await dev.waitFor("Simulated failure.");
  await dev.waitFor(`${OBJECT} => Ping from a sync daemon: field='value', retry=3`);
  await dev.waitFor(`${OBJECT} => Ping from an async daemon: field='value'`);
  const obj = await dev.waitGet("the daemon's patch", `${KEX}/kopf-example-1`, (r) => r.body?.status?.message);
  assert.equal(obj.body.status.message, "Failed 3 times.");
  await dev.stop();
  await dev.waitFor(`${OBJECT} Daemon 'background_sync' succeeded.`);
}));

function kex(name, field, labels = {}) {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name, namespace: "default", labels }, spec: { field } };
}

test("17-admission: webhooks deny, warn and mutate", (t) => run(t, "17-admission", async (dev) => {
  await dev.waitFor("MutatingWebhookConfiguration 'auto.kopf.dev' is created: 1 webhook(s).");
  const denied = await dev.api("POST", KEX, kex("wrong-1", "wrong"));
  assert.ok(denied.status >= 400, JSON.stringify(denied.body));
  assert.match(denied.body.message, /denied the request: Meh! I don't like it. Change the field./);
  await dev.waitFor("[default/wrong-1] Handler 'validate1' denied the CREATE request: Meh! I don't like it. Change the field.");
  const lazy = await dev.api("POST", KEX, kex("lazy-1", "not-allowed"));
  assert.ok(lazy.status >= 400 && /I'm too lazy anyway. Go away!/.test(lazy.body.message), JSON.stringify(lazy.body));
  const good = await dev.api("POST", KEX, kex("good-1", "value", { somelabel: "somevalue" }));
  assert.equal(good.status, 201, JSON.stringify(good.body));
  assert.match(good.headers.get("warning") ?? "", /Accessing as user-agent: /);
  assert.equal(good.body.spec.injected, 123);
}, { applyObject: false }));
