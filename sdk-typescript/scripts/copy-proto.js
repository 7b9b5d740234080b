// Copies the contract (proto/bosun/v1/handler.proto of the repository) into the package, so
// that an installed package loads it at run time and proto-loader-gen-types finds it.
const fs = require("node:fs");
const path = require("node:path");

const from = path.join(__dirname, "..", "..", "proto", "bosun", "v1", "handler.proto");
const to = path.join(__dirname, "..", "proto", "bosun", "v1", "handler.proto");
if (fs.existsSync(from)) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
} else if (!fs.existsSync(to)) {
  console.error(`copy-proto: neither ${from} nor ${to} exists`);
  process.exit(1);
}
