/**
 * Loads the contract (`proto/bosun/v1/handler.proto`) and gRPC's grpc.health.v1
 * (`proto/grpc/health/v1/health.proto`, from grpc's `grpc-health-check` package), both copied
 * into the package at build time by `scripts/copy-proto.js`, at run time. The message types
 * under `./generated` are produced from the contract by `proto-loader-gen-types`; the loader
 * options here match its flags.
 */
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ProtoGrpcType } from "./generated/handler";

/** The folder holding the package's `.proto` files. */
export const PROTO_DIR = path.join(__dirname, "..", "proto");

const OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

let loaded: { bosun: ProtoGrpcType["bosun"]; health: grpc.GrpcObject } | undefined;

/** The loaded `bosun.v1` package and `grpc.health.v1`, loaded once. */
export function contract(): { bosun: ProtoGrpcType["bosun"]; health: grpc.GrpcObject } {
  if (loaded === undefined) {
    const handler = protoLoader.loadSync("bosun/v1/handler.proto", OPTIONS);
    const health = protoLoader.loadSync("grpc/health/v1/health.proto", OPTIONS);
    const bosun = (grpc.loadPackageDefinition(handler) as unknown as ProtoGrpcType).bosun;
    const grpcHealth = (grpc.loadPackageDefinition(health) as any).grpc.health.v1 as grpc.GrpcObject;
    loaded = { bosun, health: grpcHealth };
  }
  return loaded;
}
