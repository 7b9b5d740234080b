// The server over real gRPC on 127.0.0.1:0, called with a grpc-js client.
const test = require("node:test");
const assert = require("node:assert/strict");
const grpc = require("@grpc/grpc-js");
const { bosun, bytes, json, kex } = require("./helpers");
const { contract } = require("../dist/proto.js");

function call(client, method, request) {
  return new Promise((resolve, reject) => client[method](request, (error, response) => (error ? reject(error) : resolve(response))));
}

test("Describe, Handle and health answer over gRPC", async (t) => {
  const registry = new bosun.Registry();
  registry.register("create", { group: "kopf.dev", version: "v1", plural: "kopfexamples" }, ({ spec }) => ({ field: spec.field }), { id: "create" });
  registry.owns("kopfexamples", "v1/pods");
  const running = await bosun.serve({ registry, listen: "127.0.0.1:0", serverName: "grpc-test" });
  t.after(() => running.stop(1));
  assert.ok(running.port > 0);
  const { bosun: pb, health } = contract();
  const client = new pb.v1.HandlerServer(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure());
  const healthClient = new health.Health(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure());
  t.after(() => { client.close(); healthClient.close(); });

  assert.deepEqual(await call(healthClient, "Check", { service: "" }), { status: "SERVING" });

  const described = await call(client, "Describe", { controller_version: "test" });
  assert.equal(described.server_name, "grpc-test");
  assert.deepEqual(described.handlers.map((h) => [h.id, h.kind, h.resource.name]), [["create", "HANDLER_KIND_CREATE", "kopfexamples"]]);
  assert.deepEqual(described.resources.map((r) => [r.resource.name, r.owns.map((k) => k.name), r.ignored_fields]), [["kopfexamples", ["v1/pods"], []]]);

  const handled = await call(client, "Handle", { handler_id: "create", reason: "REASON_CREATE", object: bytes(kex()) });
  assert.equal(handled.outcome, "OUTCOME_SUCCESS");
  assert.deepEqual(json(handled.result), { field: "value" });

  await assert.rejects(call(client, "Handle", { handler_id: "no-such-handler", reason: "REASON_CREATE", object: bytes(kex()) }), (e) => {
    assert.equal(e.code, grpc.status.NOT_FOUND);
    assert.equal(e.details, 'handler server "grpc-test" has no handler "no-such-handler"; it has: create');
    return true;
  });
});

test("listen addresses are read as the contract says", () => {
  assert.equal(bosun.listenAddress("http://127.0.0.1:5"), "127.0.0.1:5");
  assert.equal(bosun.listenAddress("unix:///tmp/s.sock"), "unix:///tmp/s.sock");
  assert.throws(() => bosun.listenAddress("nohost"), /invalid listen address/);
});

test("a daemon streams over gRPC, and StopDaemon or the call's cancellation stops it", { timeout: 30_000 }, async (t) => {
  const registry = new bosun.Registry();
  const ended = [];
  let bEnded;
  const bEnds = new Promise((resolve) => (bEnded = resolve));
  registry.register("daemon", "kopfexamples", async ({ stopped, logger, name }) => {
    logger.info(`started ${name}`);
    while (!(await bosun.sleep(30, stopped)));
    ended.push(name);
    if (name === "b") bEnded();
  }, { id: "daemon" });
  const running = await bosun.serve({ registry, listen: "127.0.0.1:0" });
  t.after(() => running.stop(1));
  const { bosun: pb } = contract();
  const client = new pb.v1.HandlerServer(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure());
  t.after(() => client.close());

  const open = (name, uid) => {
    const call = client.Daemon({ handler_id: "daemon", object: bytes(kex(undefined, { metadata: { name, uid } })) });
    const messages = [];
    const started = new Promise((resolve) => call.on("data", (m) => { messages.push(m); if (m.log) resolve(); }));
    const ended = new Promise((resolve) => { call.on("end", resolve); call.on("error", resolve); });
    return { call, messages, started, ended };
  };

  const stoppedOne = open("a", "uid-a");
  await stoppedOne.started;
  assert.deepEqual(await call(client, "StopDaemon", { handler_id: "daemon", uid: "uid-a" }), { stopping: true });
  await stoppedOne.ended;
  assert.deepEqual(stoppedOne.messages.map((m) => m.message), ["log", "exit"]);
  assert.equal(stoppedOne.messages[0].log.message, "started a");
  assert.equal(stoppedOne.messages[1].exit.stopped, true);

  const cancelledOne = open("b", "uid-b");
  await cancelledOne.started;
  cancelledOne.call.cancel();
  await cancelledOne.ended;
  await bEnds; // the test's own deadline applies
  assert.deepEqual(ended, ["a", "b"], "the cancellation aborted `stopped`");
});
