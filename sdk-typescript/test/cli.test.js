// The CLI: imports .ts (through tsx) and .mjs handler files, serves them on $BOSUN_LISTEN,
// says where, and stops on SIGTERM with exit code 0.
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const { spawn } = require("node:child_process");

const CLI = path.join(__dirname, "..", "dist", "cli.js");

test("the CLI serves the handlers of .ts and .mjs files until SIGTERM", async () => {
  const child = spawn(process.execPath, [CLI, path.join(__dirname, "fixtures", "handlers.ts"), path.join(__dirname, "fixtures", "handlers.mjs")], {
    env: { ...process.env, BOSUN_LISTEN: "127.0.0.1:0" }, stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const serving = new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`no "Serving" line within 30 s: ${output}`)), 30_000);
    const onData = (chunk) => {
      output += chunk;
      if (/Serving 2 handler\(s\) on 127\.0\.0\.1:[1-9][0-9]*\.\n/.test(output)) {
        clearTimeout(deadline);
        resolve();
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then(() => { clearTimeout(deadline); reject(new Error(`the CLI exited: ${output}`)); });
  });
  try {
    await serving;
  } finally {
    child.kill("SIGTERM");
  }
  assert.equal(await exited, 0, output);
});

test("the CLI without files prints its usage and fails", async () => {
  const child = spawn(process.execPath, [CLI], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c) => (stderr += c));
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 2);
  assert.match(stderr, /usage: bosun-node FILE/);
});
