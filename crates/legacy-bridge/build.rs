//! Compiles the legacy CSI messages that the tests' fake driver serves
//! (`tests/proto/legacy_csi.proto`, which imports the released `proto/csi.proto`) with protox (no
//! protoc) and prost-build, into `OUT_DIR/legacy`; the released messages it names are
//! volhealth_csi's own types, not generated again. The library uses none of it: its own reading
//! of the legacy shape is `src/wire.rs`, and the tests check it against a driver whose messages
//! come from a schema, as a real driver's do.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_dir = manifest_dir.join("tests/proto");
    let csi_dir = manifest_dir.join("../../proto");
    let file = "legacy_csi.proto";
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    println!(
        "cargo:rerun-if-changed={}",
        csi_dir.join("csi.proto").display()
    );
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?).join("legacy");
    std::fs::create_dir_all(&out_dir)?;
    let descriptors = protox::compile([file], [&proto_dir, &csi_dir])?;
    prost_build::Config::new()
        .out_dir(&out_dir)
        .extern_path(".csi.v1", "::volhealth_csi::v1")
        .compile_fds(descriptors)?;
    Ok(())
}
