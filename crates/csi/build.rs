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
    std::fs::write(
        out_dir.join(REDACTED_DEBUG_FILE),
        plan.rust_code("crate::redact::Redacted"),
    )?;
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

    compile_redaction_fixture(&manifest_dir, &proto_dir, &out_dir)?;
    Ok(())
}

/// Generates the test-only fixture package (into OUT_DIR/fixture) whose shapes
/// exercise every branch of the redacting `Debug` generator.
fn compile_redaction_fixture(
    manifest_dir: &std::path::Path,
    proto_dir: &std::path::Path,
    out_dir: &std::path::Path,
) -> Result<(), Box<dyn Error>> {
    let fixture_dir = manifest_dir.join("tests/proto");
    let file = "redaction_fixture.proto";
    println!(
        "cargo:rerun-if-changed={}",
        fixture_dir.join(file).display()
    );
    let mut compiler = protox::Compiler::new([&fixture_dir, &proto_dir.to_path_buf()])?;
    compiler.include_imports(true);
    compiler.open_files([file])?;
    let plan = redaction::plan(
        &compiler.descriptor_pool(),
        "volhealth.fixture.redaction",
        "csi.v1.csi_secret",
    )?;
    let fixture_out = out_dir.join("fixture");
    std::fs::create_dir_all(&fixture_out)?;
    std::fs::write(
        fixture_out.join("redacted_debug.rs"),
        plan.rust_code("::volhealth_csi::redact::Redacted"),
    )?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .out_dir(&fixture_out)
        .extern_path(".csi.v1", "::volhealth_csi::v1")
        .skip_debug(plan.skip_debug_paths())
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
