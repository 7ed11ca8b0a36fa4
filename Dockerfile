# The one `volhealth` binary in a minimal, non-root image. The same image runs the monitor
# (`volhealth monitor`) and the agent (`volhealth agent`); deploy/kubernetes/ uses it for both.
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
RUN cargo build --release --locked -p volhealth --bin volhealth

# glibc and libgcc, CA certificates, no shell. The nonroot variant's user is 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/volhealth /usr/local/bin/volhealth
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/volhealth"]
