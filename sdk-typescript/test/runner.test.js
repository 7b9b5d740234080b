// testing.Runner against a stand-in bosun (fixtures/fake-bosun.js), and how the binary is found.
// The Runner against the real bosun dev: examples/typescript/test/testing.test.mjs.
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { testing } = require("./helpers").bosun;

/** A folder with an executable `bosun` that runs the stand-in with this node. */
function fakeBosun(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bosun-fake-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const binary = path.join(dir, "bosun");
  fs.writeFileSync(binary, `#!/bin/sh\nexec "${process.execPath}" "${path.join(__dirname, "fixtures", "fake-bosun.js")}" "$@"\n`, { mode: 0o755 });
  return { dir, binary };
}

test("a Runner collects the output, waits for a line, and stops bosun with SIGINT", async (t) => {
  const { binary } = fakeBosun(t);
  const runner = new testing.Runner(["dev", "--apply", "crd.yaml", "handlers.ts"], { bosun: binary, env: { ...process.env, BOSUN_NODE: "" } });
  t.after(() => runner.stop());
  assert.equal(runner.exitCode, null);
  await runner.start();
  await runner.waitFor("Handler 'create_fn' succeeded.", { timeoutMs: 10_000 });
  await runner.waitFor(/^Ready\.$/m, { timeoutMs: 10_000 });
  assert.ok(runner.dir && fs.existsSync(runner.dir), "dev gets a temporary --dir");
  assert.ok(runner.output.includes(`args: ${JSON.stringify(["dev", "--dir", runner.dir, "--apply", "crd.yaml", "handlers.ts"])}\n`), runner.output);
  assert.ok(runner.output.includes(`BOSUN_NODE=${process.execPath} NO_COLOR=1\n`), `an empty BOSUN_NODE is this node:\n${runner.output}`);
  assert.deepEqual(await runner.stop(), { code: 0, signal: null });
  assert.equal(runner.exitCode, 0);
  assert.equal(runner.count("Stopping."), 1);
  assert.equal(fs.existsSync(runner.dir), false, "the temporary --dir is removed");
  assert.deepEqual(await runner.stop(), { code: 0, signal: null }, "stop() again is harmless");
});

test("waitFor fails with the output when bosun exits first, or at its deadline", async (t) => {
  const { binary } = fakeBosun(t);
  const exiting = await new testing.Runner(["run"], { bosun: binary, env: { ...process.env, FAKE_BOSUN: "exit" } }).start();
  t.after(() => exiting.stop());
  await assert.rejects(exiting.waitFor("never printed"), (e) => /bosun exited \(\{"code":3,"signal":null\}\) before printing never printed; its output:\nargs: \["run"\]/.test(e.message));
  assert.equal(exiting.exitCode, 3);
  assert.equal(exiting.dir, undefined, "only dev has a --dir");
  const running = await new testing.Runner(["run"], { bosun: binary }).start();
  t.after(() => running.stop());
  // Its first line first (a loaded machine may start it slower than the 200 ms below).
  await running.waitFor("args:", { timeoutMs: 10_000 });
  await assert.rejects(running.waitFor("never printed", { timeoutMs: 200 }), /never printed did not appear within 200 ms; bosun's output:\nargs:/);
  await assert.rejects(running.waitFor("Handler", { count: 2, timeoutMs: 200 }), /did not appear within 200 ms/);
});

test("a bosun that ignores SIGINT is killed after the grace period", async (t) => {
  const { binary } = fakeBosun(t);
  const runner = await new testing.Runner(["run"], { bosun: binary, graceMs: 300, env: { ...process.env, FAKE_BOSUN: "stubborn" } }).start();
  t.after(() => runner.stop());
  await runner.waitFor("Ready.");
  assert.deepEqual(await runner.stop(), { code: null, signal: "SIGKILL" });
  assert.equal(runner.exitCode, null);
  assert.equal(runner.count("Ignoring SIGINT."), 1);
});

test("the binary: the option, else $BOSUN_BINARY, else bosun on PATH, else target/debug/bosun above the cwd", (t) => {
  const { dir, binary } = fakeBosun(t);
  const project = fs.mkdtempSync(path.join(os.tmpdir(), "bosun-project-"));
  t.after(() => fs.rmSync(project, { recursive: true, force: true }));
  const nested = path.join(project, "a", "b");
  fs.mkdirSync(nested, { recursive: true });
  const none = { PATH: "" };
  assert.equal(testing.bosunBinary({ bosun: binary, env: none }), binary);
  assert.equal(testing.bosunBinary({ env: { BOSUN_BINARY: binary } }), binary);
  assert.equal(testing.bosunBinary({ cwd: nested, env: { PATH: `/nonexistent${path.delimiter}${dir}` } }), binary);
  fs.mkdirSync(path.join(project, "target", "debug"), { recursive: true });
  fs.copyFileSync(binary, path.join(project, "target", "debug", "bosun"));
  assert.equal(testing.bosunBinary({ cwd: nested, env: none }), path.join(project, "target", "debug", "bosun"));
  fs.rmSync(path.join(project, "target"), { recursive: true });
  assert.throws(() => testing.bosunBinary({ cwd: nested, env: none }), (e) => e instanceof testing.BosunNotFound
    && e.message.includes("tried: the bosun option (not given); $BOSUN_BINARY (unset); bosun on the PATH (0 folder(s)); target/debug/bosun in")
    && e.message.includes("set BOSUN_BINARY"));
  assert.throws(() => testing.bosunBinary({ env: { BOSUN_BINARY: "/no/such/bosun" } }), /\$BOSUN_BINARY=\/no\/such\/bosun \(no such file\)/);
  assert.throws(() => testing.bosunBinary({ bosun: "/no/such/bosun" }), /the bosun option \/no\/such\/bosun \(no such file\)/);
});

test("requireBosun: true with a binary; without one, a skip with the reason, or under CI a failure", (t) => {
  const { binary } = fakeBosun(t);
  const saved = { CI: process.env.CI, BOSUN_BINARY: process.env.BOSUN_BINARY };
  t.after(() => {
    for (const [k, v] of Object.entries(saved)) (v === undefined ? delete process.env[k] : (process.env[k] = v));
  });
  const skipped = [];
  const fakeT = { name: "needs bosun", skip: (m) => skipped.push(m) };
  assert.equal(testing.requireBosun(fakeT, { bosun: binary }), true);
  process.env.BOSUN_BINARY = "/no/such/bosun";
  process.env.CI = "false";
  const written = [];
  const write = process.stderr.write;
  process.stderr.write = (chunk) => written.push(String(chunk));
  try {
    assert.equal(testing.requireBosun(fakeT), false);
  } finally {
    process.stderr.write = write;
  }
  assert.match(written.join(""), /^SKIPPED needs bosun: no bosun binary found/);
  assert.match(skipped[0], /no bosun binary found; tried: .*\(under CI=true this fails\)/);
  process.env.CI = "true";
  assert.throws(() => testing.requireBosun(fakeT), /no bosun binary found.*under CI \(CI=true\) that fails the test/s);
});

test("bad input to the Runner is a clear error", async () => {
  assert.throws(() => new testing.Runner("dev handlers.ts"), /Runner takes an array of string arguments/);
  await assert.rejects(new testing.Runner(["run"]).waitFor("x"), /start\(\) the Runner before waitFor\(\)/);
  assert.equal(await new testing.Runner(["run"]).stop(), undefined);
});
