// Copies the .proto files the package loads at run time into its proto/ folder (also where
// proto-loader-gen-types finds the contract): the contract, proto/bosun/v1/handler.proto of
// the repository, and gRPC's own grpc.health.v1, taken from grpc's grpc-health-check package
// (a devDependency, in node_modules at build time; not a file of this repository). In an
// installed package, where neither source exists, the copies it was built with stay.
const fs = require("node:fs");
const path = require("node:path");

const root = path.join(__dirname, "..");

/** The folder of an installed package, or null where it is not installed. */
function packageDir(name) {
  try {
    return path.dirname(require.resolve(`${name}/package.json`, { paths: [root] }));
  } catch {
    return null;
  }
}

const health = packageDir("grpc-health-check");
const copies = [
  [path.join(root, "..", "proto", "bosun", "v1", "handler.proto"), path.join(root, "proto", "bosun", "v1", "handler.proto")],
  [health && path.join(health, "proto", "health", "v1", "health.proto"), path.join(root, "proto", "grpc", "health", "v1", "health.proto")],
];
for (const [from, to] of copies) {
  if (from && fs.existsSync(from)) {
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
  } else if (!fs.existsSync(to)) {
    console.error(`copy-proto: neither ${from} nor ${to} exists`);
    process.exit(1);
  }
}
