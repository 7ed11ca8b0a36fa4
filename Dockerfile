# The `volhealth` binary in a minimal, non-root image, with the two sidecars' single-component
# binaries beside it: `volhealth-monitor` and `volhealth-agent` take the flags of `volhealth monitor`
# and `volhealth agent` and map far less code per process. deploy/kubernetes/ runs those two and
# `volhealth remediate`.
#
#   docker build --build-arg VOLHEALTH_GIT_REVISION="$(git rev-parse --short=12 HEAD)" \
#     -t REGISTRY/volhealth:TAG .
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VOLHEALTH_GIT_REVISION="$(git rev-parse --short=12 HEAD)" -t REGISTRY/volhealth:TAG --push .
#
# Every platform is cross-compiled on the build machine's own platform (no emulation): the build
# stage runs on $BUILDPLATFORM and builds for $TARGETPLATFORM with Debian's cross toolchain. It
# needs nothing but the Rust image and Debian's packages: the CSI protobufs are compiled in pure
# Rust (protox, no protoc), the TLS stack is rustls with ring, and SQLite is bundled.

# The workspace's rust-version (Cargo.toml); bookworm's glibc matches the runtime image's.
FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.89-bookworm AS build
ARG TARGETARCH
# The revision `--version` and `volhealth_build_info` name; the build context has no .git.
ARG VOLHEALTH_GIT_REVISION=unknown
ENV VOLHEALTH_GIT_REVISION=${VOLHEALTH_GIT_REVISION}
# The Rust target and, when it is not the build machine's, the C cross compiler that ring and
# SQLite's bundled C sources need.
RUN set -eu; \
    case "$TARGETARCH" in \
      amd64) target=x86_64-unknown-linux-gnu; gcc=x86-64-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu; gcc=aarch64-linux-gnu ;; \
      *) echo "unsupported TARGETARCH $TARGETARCH (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    echo "$target" > /rust-target; \
    if [ "$target" != "$(rustc -vV | sed -n 's/^host: //p')" ]; then \
      apt-get update -qq; \
      apt-get install -y -qq --no-install-recommends "gcc-$gcc" "libc6-dev-$TARGETARCH-cross"; \
      rustup target add "$target"; \
      env_target=$(echo "$target" | tr 'a-z-' 'A-Z_'); \
      { echo "export CARGO_TARGET_${env_target}_LINKER=$gcc-gcc"; \
        echo "export CC_$(echo "$target" | tr '-' '_')=$gcc-gcc"; } > /cross-env; \
    else \
      : > /cross-env; \
    fi
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY proto proto
# up compiles in the monitor's RBAC from deploy/kubernetes.
COPY deploy/kubernetes deploy/kubernetes
COPY crates crates
# The sidecars are built with the size-optimised `sidecar` profile (Cargo.toml): most of a
# sidecar's resident memory is its own code. They are position-dependent executables (no
# load-time relocations, see Cargo.toml); naming the target keeps RUSTFLAGS off build scripts and
# proc macros.
RUN set -eu; . /cross-env; target=$(cat /rust-target); \
    cargo build --release --locked --target "$target" -p volhealth --bin volhealth; \
    RUSTFLAGS="-C relocation-model=static" cargo build --profile sidecar --locked \
      --target "$target" -p volhealth --bin volhealth-monitor --bin volhealth-agent; \
    mkdir -p /out; \
    cp "target/$target/release/volhealth" "target/$target/sidecar/volhealth-monitor" \
       "target/$target/sidecar/volhealth-agent" /out/

# glibc and libgcc, CA certificates, no shell. The nonroot variant's user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VOLHEALTH_GIT_REVISION=unknown
LABEL org.opencontainers.image.title="volhealth" \
      org.opencontainers.image.description="Kubernetes volume health monitoring (KEP-1432): the monitor and agent sidecars, the remediation controller, the scheduler extender" \
      org.opencontainers.image.source="https://github.com/volhealth/volhealth" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${VOLHEALTH_GIT_REVISION}"
COPY --from=build /out/volhealth /usr/local/bin/volhealth
COPY --from=build /out/volhealth-monitor /usr/local/bin/volhealth-monitor
COPY --from=build /out/volhealth-agent /usr/local/bin/volhealth-agent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/volhealth"]
