# The controller's image: a static `bosun` (musl libc, jemalloc) alone in an empty image,
# running as a non-root user. deploy/base runs it as `bosun:latest`. Build it with
# deploy/build-image, which gives the labels their values (the version from Cargo.toml's
# workspace, the only place it is written) and works with podman, buildah or docker:
#
#     deploy/build-image bosun:latest                          # compiles in the `build` stage
#     BOSUN_BINARY=target/x86_64-unknown-linux-musl/release/bosun deploy/build-image bosun:latest
#
# The second takes a static binary built beforehand (by this file's `cargo build` line) in
# place of the `build` stage (`--build-context build=DIR`): no Rust image is pulled, nothing is
# compiled twice. controller/tests/image.rs runs the `cargo build` line on the host, checks that
# the binary is static, builds the image from it with podman and runs `bosun run` in it.
FROM docker.io/library/rust:1.95-bookworm AS build
# musl-gcc: jemalloc and ring compile C for the musl target.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN target="$(uname -m)-unknown-linux-musl" \
 && rustup target add "$target" \
 && cargo build --release --locked --target "$target" -p bosun-controller --bin bosun --features jemalloc \
 && cp "target/$target/release/bosun" /bosun

# Nothing but the binary: no shell, no libc, no package manager. In a pod the kubelet mounts
# /etc/hosts, /etc/resolv.conf and the service account's token and CA; musl resolves names
# from those files without NSS modules.
FROM scratch
# The OCI annotations (image-spec's annotations.md), filled in by deploy/build-image.
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=unknown
ARG LICENSES=unknown
LABEL org.opencontainers.image.title="bosun" \
      org.opencontainers.image.description="Bosun's controller: Kopf's semantics, handlers served over gRPC in any language" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="$SOURCE" \
      org.opencontainers.image.licenses="$LICENSES"
COPY --from=build /bosun /bosun
# A numeric user, so that the kubelet can check `runAsNonRoot` without an /etc/passwd.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/bosun"]
CMD ["run", "--help"]
