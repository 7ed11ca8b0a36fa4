//! An RPC error keeps the code and the driver's message, and nothing a driver
//! might echo back from a request (details, metadata), which may hold secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

const SECRET: &str = "s3cr3t-VALUE";

#[test]
fn rpc_errors_keep_only_the_code_and_the_drivers_message() {
    let mut status = tonic::Status::with_details(
        tonic::Code::PermissionDenied,
        "bad credentials",
        SECRET.as_bytes().to_vec().into(),
    );
    status
        .metadata_mut()
        .insert("x-echo", SECRET.parse().expect("metadata value"));
    let err = volhealth_csi::Error::rpc("ControllerGetVolumeHealth", &status);
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains("ControllerGetVolumeHealth") && text.contains("bad credentials"));
    }
}
