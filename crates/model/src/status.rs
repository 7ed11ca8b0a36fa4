//! The API's health vocabulary and its mapping from CSI v1.13.0 enum numbers.
//!
//! The KEP text numbers the CSI enums differently from the released spec; the released numbers
//! (`DEGRADED=1, INACCESSIBLE=2, DATA_LOSS=3`, `STORAGE_DEGRADED=1, STORAGE_UNREACHABLE=2`) win.

use volhealth_csi_proto::v1::{StorageHealthErrorType, VolumeHealthErrorType};

/// A per-volume health category, as `pvc.status.healthStatus` and `pod.status.volumeHealth` spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VolumeStatus {
    /// The volume cannot be accessed (from anywhere, or from the reporting node).
    Inaccessible,
    /// Data loss is known or strongly suspected.
    DataLoss,
    /// The volume works, but not as it should.
    Degraded,
}

impl VolumeStatus {
    /// Every known value, most severe first (the order used to keep conditions within limits).
    pub const ALL: [VolumeStatus; 3] = [Self::Inaccessible, Self::DataLoss, Self::Degraded];

    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inaccessible => "Inaccessible",
            Self::DataLoss => "DataLoss",
            Self::Degraded => "Degraded",
        }
    }

    /// Parses the API string.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Maps a raw CSI `VolumeHealthErrorType`; `None` for UNKNOWN (0) and values this version
    /// does not know, which callers must surface rather than treat as healthy.
    pub fn from_csi(raw: i32) -> Option<Self> {
        match VolumeHealthErrorType::try_from(raw).ok()? {
            VolumeHealthErrorType::Inaccessible => Some(Self::Inaccessible),
            VolumeHealthErrorType::DataLoss => Some(Self::DataLoss),
            VolumeHealthErrorType::Degraded => Some(Self::Degraded),
            VolumeHealthErrorType::UnknownVolumeHealthType => None,
        }
    }

    /// The CSI enum value for this status.
    pub fn to_csi(self) -> VolumeHealthErrorType {
        match self {
            Self::Inaccessible => VolumeHealthErrorType::Inaccessible,
            Self::DataLoss => VolumeHealthErrorType::DataLoss,
            Self::Degraded => VolumeHealthErrorType::Degraded,
        }
    }

    /// Position in the severity order (0 is most severe); unknown strings sort last.
    pub fn rank_of(s: &str) -> usize {
        Self::parse(s).map_or(Self::ALL.len(), |v| v as usize)
    }
}

impl std::fmt::Display for VolumeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A storage-backend health category, as `csinode.status.storageHealth` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StorageStatus {
    /// The backend cannot be reached from this node.
    StorageUnreachable,
    /// The backend works in a degraded state.
    StorageDegraded,
}

impl StorageStatus {
    /// Every known value, most severe first.
    pub const ALL: [StorageStatus; 2] = [Self::StorageUnreachable, Self::StorageDegraded];

    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StorageUnreachable => "StorageUnreachable",
            Self::StorageDegraded => "StorageDegraded",
        }
    }

    /// Parses the API string.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Maps a raw CSI `StorageHealthErrorType`; `None` for UNKNOWN (0) and unknown values.
    pub fn from_csi(raw: i32) -> Option<Self> {
        match StorageHealthErrorType::try_from(raw).ok()? {
            StorageHealthErrorType::StorageUnreachable => Some(Self::StorageUnreachable),
            StorageHealthErrorType::StorageDegraded => Some(Self::StorageDegraded),
            StorageHealthErrorType::UnknownStorageHealthErrorType => None,
        }
    }

    /// The CSI enum value for this status.
    pub fn to_csi(self) -> StorageHealthErrorType {
        match self {
            Self::StorageUnreachable => StorageHealthErrorType::StorageUnreachable,
            Self::StorageDegraded => StorageHealthErrorType::StorageDegraded,
        }
    }

    /// Position in the severity order (0 is most severe); unknown strings sort last.
    pub fn rank_of(s: &str) -> usize {
        Self::parse(s).map_or(Self::ALL.len(), |v| v as usize)
    }
}

impl std::fmt::Display for StorageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_numbers_map_to_api_strings() {
        assert_eq!(VolumeStatus::from_csi(1), Some(VolumeStatus::Degraded));
        assert_eq!(VolumeStatus::from_csi(2), Some(VolumeStatus::Inaccessible));
        assert_eq!(VolumeStatus::from_csi(3), Some(VolumeStatus::DataLoss));
        assert_eq!(VolumeStatus::from_csi(0), None);
        assert_eq!(VolumeStatus::from_csi(4), None);
        assert_eq!(VolumeStatus::from_csi(-1), None);
        assert_eq!(
            StorageStatus::from_csi(1),
            Some(StorageStatus::StorageDegraded)
        );
        assert_eq!(
            StorageStatus::from_csi(2),
            Some(StorageStatus::StorageUnreachable)
        );
        assert_eq!(StorageStatus::from_csi(0), None);
        assert_eq!(StorageStatus::from_csi(9), None);
    }

    #[test]
    fn strings_round_trip() {
        for v in VolumeStatus::ALL {
            assert_eq!(VolumeStatus::parse(v.as_str()), Some(v));
            assert_eq!(VolumeStatus::from_csi(v.to_csi() as i32), Some(v));
        }
        for v in StorageStatus::ALL {
            assert_eq!(StorageStatus::parse(v.as_str()), Some(v));
            assert_eq!(StorageStatus::from_csi(v.to_csi() as i32), Some(v));
        }
        assert_eq!(VolumeStatus::parse("Healthy"), None);
    }
}
