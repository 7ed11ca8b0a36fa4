//! Compiles the legacy CSI messages that the tests' fake driver serves
//! (`tests/proto/legacy_csi.proto`) with protox (no protoc) and prost-build, into
//! `OUT_DIR/legacy`. The library uses none of it: its own reading of the legacy shape is
//! `src/wire.rs`, and the tests check it against a driver whose messages come from a schema,
//! as a real driver's do.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_dir = manifest_dir.join("tests/proto");
    let file = "legacy_csi.proto";
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?).join("legacy");
    std::fs::create_dir_all(&out_dir)?;
    let descriptors = protox::compile([file], [&proto_dir])?;
    prost_build::Config::new()
        .out_dir(&out_dir)
        .compile_fds(descriptors)?;
    Ok(())
}
