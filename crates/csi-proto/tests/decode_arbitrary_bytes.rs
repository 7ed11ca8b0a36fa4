//! A driver may send anything: decoding arbitrary bytes as any health
//! response must return a value or an error, never panic, and whatever
//! decodes must survive an encode/decode round trip unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use proptest::prelude::*;
use prost::Message;
use volhealth_csi_proto::v1;

fn check<M: Message + Default + PartialEq + std::fmt::Debug>(
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    if let Ok(msg) = M::decode(bytes) {
        let again = M::decode(msg.encode_to_vec().as_slice());
        prop_assert_eq!(again.as_ref().ok(), Some(&msg));
        let _ = format!("{msg:?}");
    }
    Ok(())
}

fn all_health_responses(bytes: &[u8]) -> Result<(), TestCaseError> {
    check::<v1::ControllerListVolumeHealthResponse>(bytes)?;
    check::<v1::ControllerGetVolumeHealthResponse>(bytes)?;
    check::<v1::NodeGetVolumeHealthResponse>(bytes)?;
    check::<v1::NodeGetStorageHealthResponse>(bytes)?;
    check::<v1::VolumeHealth>(bytes)?;
    check::<v1::ControllerGetCapabilitiesResponse>(bytes)?;
    check::<v1::NodeGetCapabilitiesResponse>(bytes)?;
    Ok(())
}

/// A valid, non-trivial list response to mutate.
fn sample() -> Vec<u8> {
    use v1::node_get_storage_health_response::StorageBackendHealth;
    use v1::volume_health::VolumeHealthEntry;
    let mut out = v1::ControllerListVolumeHealthResponse {
        entries: vec![v1::VolumeHealth {
            volume_id: "vol-1".into(),
            health_statuses: vec![VolumeHealthEntry {
                status: v1::VolumeHealthErrorType::DataLoss as i32,
                reason: "ChecksumMismatch".into(),
                message: "block 7".into(),
            }],
        }],
        next_token: "page-2".into(),
    }
    .encode_to_vec();
    out.extend(
        v1::NodeGetStorageHealthResponse {
            backend_health: vec![StorageBackendHealth {
                status: 2,
                reason: "PathDown".into(),
                message: String::new(),
                volume_capability: Some(Default::default()),
            }],
        }
        .encode_to_vec(),
    );
    out
}

/// 1,500 cases in every run; the fuzz run sets `VOLHEALTH_FUZZ_CASES=100000` (see
/// docs/benchmarks.md). Read here, not through testkit's `fuzz_cases`: testkit would bring a
/// transport into this crate's dependencies (see tests/no_transport.rs of volhealth-model).
fn cases() -> u32 {
    std::env::var("VOLHEALTH_FUZZ_CASES").map_or(1500, |v| {
        v.trim()
            .parse()
            .expect("VOLHEALTH_FUZZ_CASES is a whole number of cases")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        all_health_responses(&bytes)?;
    }

    #[test]
    fn mutated_valid_responses_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = sample();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        bytes.truncate(cut.index(bytes.len()) + 1);
        all_health_responses(&bytes)?;
    }
}
