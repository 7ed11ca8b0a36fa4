# The `volhealth` binary in a minimal, non-root image, with the two sidecars' single-component
# binaries beside it: `volhealth-monitor` and `volhealth-agent` take the flags of `volhealth monitor`
# and `volhealth agent` and map far less code per process. deploy/kubernetes/ runs those two and
# `volhealth remediate`.
#
#   docker build -t REGISTRY/volhealth:TAG .
#
# The build needs nothing but the Rust image: the CSI protobufs are compiled in pure Rust (protox,
# no protoc), the TLS stack is rustls with ring, and SQLite is bundled.

# The workspace's rust-version (Cargo.toml); bookworm's glibc matches the runtime image's.
FROM docker.io/library/rust:1.89-bookworm AS build
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
RUN cargo build --release --locked -p volhealth --bin volhealth \
 && RUSTFLAGS="-C relocation-model=static" cargo build --profile sidecar --locked \
      --target "$(rustc -vV | sed -n 's/^host: //p')" -p volhealth --bin volhealth-monitor --bin volhealth-agent \
 && mkdir -p /src/sidecars && cp target/*/sidecar/volhealth-monitor target/*/sidecar/volhealth-agent /src/sidecars/

# glibc and libgcc, CA certificates, no shell. The nonroot variant's user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/volhealth /usr/local/bin/volhealth
COPY --from=build /src/sidecars/volhealth-monitor /usr/local/bin/volhealth-monitor
COPY --from=build /src/sidecars/volhealth-agent /usr/local/bin/volhealth-agent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/volhealth"]
