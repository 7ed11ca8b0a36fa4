//! Compiles `proto/csi.proto` and `proto/pluginregistration.proto` with protox
//! (pure Rust, no protoc) and generates the tonic client and server code.
//!
//! Messages carrying a `csi_secret` field get a generated `Debug` that never
//! prints secret values; prost's derived `Debug` would print map contents.

#[path = "build/redaction.rs"]
mod redaction;

use std::error::Error;
use std::path::PathBuf;

/// File name (in OUT_DIR) of the encoded descriptor set, imports included.
const DESCRIPTOR_FILE: &str = "volhealth_descriptor.bin";
/// File name (in OUT_DIR) of the generated redacting `Debug` impls for csi.v1.
const REDACTED_DEBUG_FILE: &str = "csi.v1.redacted_debug.rs";
/// File name (in OUT_DIR) of the secret-message table used by the tests.
const SECRET_TABLE_FILE: &str = "csi.v1.secret_messages.rs";

fn main() -> Result<(), Box<dyn Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let proto_dir = manifest_dir.join("../../proto");
    let files = ["csi.proto", "pluginregistration.proto"];

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/redaction.rs");
    for file in files {
        println!("cargo:rerun-if-changed={}", proto_dir.join(file).display());
    }

    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.include_source_info(true);
    compiler.include_imports(true);
    compiler.open_files(files)?;

    std::fs::write(
        out_dir.join(DESCRIPTOR_FILE),
        compiler.encode_file_descriptor_set(),
    )?;

    let pool = compiler.descriptor_pool();
    let plan = redaction::plan(&pool, "csi.v1", "csi.v1.csi_secret")?;
    std::fs::write(out_dir.join(REDACTED_DEBUG_FILE), plan.rust_code())?;
    std::fs::write(
        out_dir.join(SECRET_TABLE_FILE),
        plan.test_table("volhealth_csi"),
    )?;

    // The well-known types are mapped to prost-types by prost-build.
    let fds = compiler.file_descriptor_set();

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .generate_default_stubs(true)
        .skip_debug(plan.skip_debug_paths())
        .compile_fds(fds)?;
    Ok(())
}
