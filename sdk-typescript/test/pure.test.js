// Pure parts: errors → outcomes, patches, kwargs from a body.
const test = require("node:test");
const assert = require("node:assert/strict");
const { bosun } = require("./helpers");
const { failureOf } = require("../dist/errors.js");
const { newPatch, prune } = require("../dist/patch.js");
const { objectParts, parseJson, parseBody, diffOf } = require("../dist/kwargs.js");

test("Kopf's errors map to their outcomes", () => {
  assert.deepEqual(failureOf(new bosun.TemporaryError("later", { delay: 0.2 })), { outcome: "OUTCOME_TEMPORARY_ERROR", message: "later", delay_seconds: 0.2 });
  assert.deepEqual(failureOf(new bosun.TemporaryError("later")), { outcome: "OUTCOME_TEMPORARY_ERROR", message: "later" });
  assert.deepEqual(failureOf(new bosun.PermanentError("never")), { outcome: "OUTCOME_PERMANENT_ERROR", message: "never" });
});

test("any other error is unexpected, with its stack as the message", () => {
  const failure = failureOf(new RangeError("boom"));
  assert.equal(failure.outcome, "OUTCOME_UNEXPECTED_ERROR");
  assert.match(failure.message, /^RangeError: boom\n {4}at /);
  assert.equal(failureOf("text").message, "a non-Error was thrown: text");
});

test("errors are recognised by their brand, not by their class's identity", () => {
  const foreign = Object.assign(new Error("from another copy"), { [Symbol.for("bosun-operator.error")]: "temporary", delay: 3 });
  assert.deepEqual(failureOf(foreign), { outcome: "OUTCOME_TEMPORARY_ERROR", message: "from another copy", delay_seconds: 3 });
});

test("a patch's sections spring into being and empty ones are pruned", () => {
  const patch = newPatch();
  patch.status.attempts = 2;
  patch.spec; // looked at only
  patch.meta.labels.gone = null;
  void patch.metadata.annotations;
  assert.deepEqual(prune(patch), { status: { attempts: 2 }, metadata: { labels: { gone: null } } });
  assert.equal(prune(newPatch()), undefined);
});

test("a patch takes whole objects merged in, and still vivifies inside them", () => {
  const patch = newPatch();
  Object.assign(patch, { metadata: { labels: { a: "1" } }, status: { x: 1 } });
  patch.metadata.labels.b = null;
  patch.metadata.annotations.c = "2";
  assert.deepEqual(JSON.parse(JSON.stringify(prune(patch))), { metadata: { labels: { a: "1", b: null }, annotations: { c: "2" } }, status: { x: 1 } });
});

test("kwargs come from the body with empty defaults", () => {
  const parts = objectParts({ metadata: { name: "n", namespace: "ns", uid: "u", labels: { a: "b" } }, spec: { f: 1 } });
  assert.equal(parts.name, "n");
  assert.equal(parts.namespace, "ns");
  assert.deepEqual(parts.spec, { f: 1 });
  assert.deepEqual(parts.status, {});
  assert.deepEqual(parts.labels, { a: "b" });
  assert.deepEqual(parts.annotations, {});
  assert.equal(parts.meta, parts.metadata);
  const empty = objectParts({});
  assert.equal(empty.name, "");
  assert.equal(empty.namespace, undefined);
});

test("values from the controller that are not JSON become errors naming them", () => {
  assert.equal(parseJson(Buffer.alloc(0), "x", "dflt"), "dflt");
  assert.equal(parseJson(Buffer.from("null"), "x", "dflt"), null);
  assert.throws(() => parseJson(Buffer.from("{nope"), "an object"), /the controller sent an object that is not JSON/);
  assert.throws(() => parseBody(Buffer.from("[1]")), /not a JSON object/);
});

test("diff items read as Kopf's", () => {
  const diff = diffOf([{ operation: "OPERATION_CHANGE", path: ["spec", "f"], old: Buffer.from('"a"'), new: Buffer.from('"b"') }, { operation: "OPERATION_ADD", path: ["x"], old: Buffer.alloc(0), new: Buffer.from("1") }]);
  assert.deepEqual(diff, [{ op: "change", path: ["spec", "f"], old: "a", new: "b" }, { op: "add", path: ["x"], old: undefined, new: 1 }]);
});

test("adopt makes an object a child of its owner without creating anything", () => {
  const owner = { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name: "o", namespace: "ns", uid: "u", labels: { app: "a" } } };
  const child = bosun.adopt({ apiVersion: "v1", kind: "Pod", metadata: {} }, owner);
  assert.deepEqual(child.metadata, {
    ownerReferences: [{ apiVersion: "kopf.dev/v1", kind: "KopfExample", name: "o", uid: "u", controller: true, blockOwnerDeletion: true }],
    namespace: "ns", generateName: "o-", labels: { app: "a" },
  });
});

test("sleep ends early when its signal aborts", async () => {
  const stop = new AbortController();
  const started = Date.now();
  const slept = bosun.sleep(30, stop.signal);
  stop.abort();
  assert.equal(await slept, true);
  assert.ok(Date.now() - started < 5000);
  assert.equal(await bosun.sleep(0), false);
});
