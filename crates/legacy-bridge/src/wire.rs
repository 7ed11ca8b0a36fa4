//! The legacy messages as drivers of CSI v1.3.0 – v1.12.0 send them. CSI v1.13.0 removed
//! `VolumeCondition` and reserved field 2 where it was carried, so volhealth's own v1.13 types
//! drop it while decoding; these types read and write the same bytes with the field kept, and
//! reuse the v1.13 types for everything that did not change (`Volume`, `VolumeUsage`).
//!
//! Presence is the point: `volume_condition: None` means the driver said nothing, which is never
//! taken as healthy; `Some` with `abnormal = false` is a healthy answer.

/// `csi.v1.VolumeCondition` (v1.3.0 – v1.12.0).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct VolumeCondition {
    /// Whether the volume is abnormal.
    #[prost(bool, tag = "1")]
    pub abnormal: bool,
    /// The driver's words, for humans.
    #[prost(string, tag = "2")]
    pub message: String,
}

use volhealth_csi::v1;

/// `VolumeStatus` of ListVolumes and ControllerGetVolume answers (same numbers in both).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct VolumeStatus {
    /// `published_node_ids` (field 1).
    #[prost(string, repeated, tag = "1")]
    pub published_node_ids: Vec<String>,
    /// `volume_condition` (field 2), absent when the driver sent none.
    #[prost(message, optional, tag = "2")]
    pub volume_condition: Option<VolumeCondition>,
}

/// One entry of `csi.v1.ListVolumesResponse` (and [`ControllerGetVolumeResponse`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListEntry {
    /// `volume` (field 1).
    #[prost(message, optional, tag = "1")]
    pub volume: Option<v1::Volume>,
    /// `status` (field 2).
    #[prost(message, optional, tag = "2")]
    pub status: Option<VolumeStatus>,
}

/// `csi.v1.ListVolumesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListVolumesResponse {
    /// `entries` (field 1).
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<ListEntry>,
    /// `next_token` (field 2).
    #[prost(string, tag = "2")]
    pub next_token: String,
}

/// `csi.v1.ControllerGetVolumeResponse`: the same fields, with the same numbers, as an entry of
/// ListVolumes, so the same bytes.
pub type ControllerGetVolumeResponse = ListEntry;

/// `csi.v1.NodeGetVolumeStatsResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeGetVolumeStatsResponse {
    /// `usage` (field 1).
    #[prost(message, repeated, tag = "1")]
    pub usage: Vec<v1::VolumeUsage>,
    /// `volume_condition` (field 2), absent when the driver sent none.
    #[prost(message, optional, tag = "2")]
    pub volume_condition: Option<VolumeCondition>,
}

/// Controller capability `LIST_VOLUMES`.
pub const CONTROLLER_LIST_VOLUMES: i32 = 3;
/// Controller capability `VOLUME_CONDITION` (reserved in v1.13.0).
pub const CONTROLLER_VOLUME_CONDITION: i32 = 11;
/// Controller capability `GET_VOLUME`.
pub const CONTROLLER_GET_VOLUME: i32 = 12;
/// Node capability `GET_VOLUME_STATS`.
pub const NODE_GET_VOLUME_STATS: i32 = 2;
/// Node capability `VOLUME_CONDITION` (reserved in v1.13.0).
pub const NODE_VOLUME_CONDITION: i32 = 4;

/// gRPC path of ListVolumes.
pub const LIST_VOLUMES: &str = "/csi.v1.Controller/ListVolumes";
/// gRPC path of ControllerGetVolume.
pub const CONTROLLER_GET_VOLUME_PATH: &str = "/csi.v1.Controller/ControllerGetVolume";
/// gRPC path of NodeGetVolumeStats.
pub const NODE_GET_VOLUME_STATS_PATH: &str = "/csi.v1.Node/NodeGetVolumeStats";

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn an_empty_condition_is_present_on_the_wire_and_an_absent_one_is_not() {
        // Field 2, wire type 2 (length-delimited), length 0: "healthy, nothing to say".
        let healthy = NodeGetVolumeStatsResponse::decode(&[0x12, 0x00][..]).unwrap();
        assert_eq!(
            healthy.volume_condition,
            Some(VolumeCondition {
                abnormal: false,
                message: String::new()
            })
        );
        let silent = NodeGetVolumeStatsResponse::decode(&[][..]).unwrap();
        assert_eq!(silent.volume_condition, None);
    }

    #[test]
    fn the_v1_13_types_drop_what_these_keep() {
        let legacy = NodeGetVolumeStatsResponse {
            usage: Vec::new(),
            volume_condition: Some(VolumeCondition {
                abnormal: true,
                message: "The volume isn't mounted".into(),
            }),
        }
        .encode_to_vec();
        let current =
            volhealth_csi::v1::NodeGetVolumeStatsResponse::decode(legacy.as_slice()).unwrap();
        assert!(current.encode_to_vec().is_empty(), "v1.13 has no field 2");
        let back = NodeGetVolumeStatsResponse::decode(legacy.as_slice()).unwrap();
        assert_eq!(back.volume_condition.map(|c| c.abnormal), Some(true));
    }
}
