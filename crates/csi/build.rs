//! Generates the tonic clients and servers of `proto/csi.proto` and
//! `proto/pluginregistration.proto` (compiled with protox, no protoc) against
//! the messages of `volhealth-csi-proto`: only the services are emitted here,
//! so there is one Rust type per CSI message in the whole workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a build script fails by panicking

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_dir = manifest_dir.join("../../proto");
    let files = ["csi.proto", "pluginregistration.proto"];

    println!("cargo:rerun-if-changed=build.rs");
    for file in files {
        println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    }

    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.include_imports(true);
    compiler.open_files(files)?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .generate_default_stubs(true)
        .extern_path(".csi.v1", "::volhealth_csi_proto::v1")
        .extern_path(".pluginregistration", "::volhealth_csi_proto::registration")
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
