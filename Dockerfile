# The controller's image: a static `bosun` (musl libc, jemalloc) alone in an empty image,
# running as a non-root user. deploy/base runs it as `bosun:latest`:
#
#     docker build -t bosun:latest .
#
# controller/tests/image.rs runs this file's `cargo build` line on the host and checks that the
# binary is static (no interpreter, no shared libraries) and that `bosun --version` runs in an
# empty root directory, so the recipe is tested without docker.
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
COPY --from=build /bosun /bosun
# A numeric user, so that the kubelet can check `runAsNonRoot` without an /etc/passwd.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/bosun"]
CMD ["run", "--help"]
