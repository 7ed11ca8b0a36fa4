//! storage.k8s.io/v1: CSINode, CSIDriver, StorageClass and VolumeAttachment.

use super::prelude::{Bool, Int, Str, Time, m, many, map, msg, one};

msg! { CSI_NODE "CSINode"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&CSI_NODE_SPEC)),
}

msg! { CSI_NODE_SPEC "CSINodeSpec"
    many(1, "drivers", m(&CSI_NODE_DRIVER)),
}

msg! { CSI_NODE_DRIVER "CSINodeDriver"
    one(1, "name", Str), one(2, "nodeID", Str), many(3, "topologyKeys", Str),
    one(4, "allocatable", m(&VOLUME_NODE_RESOURCES)),
}

msg! { VOLUME_NODE_RESOURCES "VolumeNodeResources"
    one(1, "count", Int),
}

msg! { CSI_DRIVER "CSIDriver"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&CSI_DRIVER_SPEC)),
}

msg! { CSI_DRIVER_SPEC "CSIDriverSpec"
    one(1, "attachRequired", Bool), one(2, "podInfoOnMount", Bool),
    many(3, "volumeLifecycleModes", Str), one(4, "storageCapacity", Bool),
    one(5, "fsGroupPolicy", Str), many(6, "tokenRequests", m(&TOKEN_REQUEST)),
    one(7, "requiresRepublish", Bool), one(8, "seLinuxMount", Bool),
    one(9, "nodeAllocatableUpdatePeriodSeconds", Int),
}

msg! { TOKEN_REQUEST "TokenRequest"
    one(1, "audience", Str), one(2, "expirationSeconds", Int),
}

msg! { STORAGE_CLASS "StorageClass"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "provisioner", Str),
    map(3, "parameters", &Str), one(4, "reclaimPolicy", Str), many(5, "mountOptions", Str),
    one(6, "allowVolumeExpansion", Bool), one(7, "volumeBindingMode", Str),
    many(8, "allowedTopologies", m(&super::pod::TOPOLOGY_SELECTOR_TERM)),
}

msg! { VOLUME_ATTACHMENT "VolumeAttachment"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&VOLUME_ATTACHMENT_SPEC)),
    one(3, "status", m(&VOLUME_ATTACHMENT_STATUS)),
}

msg! { VOLUME_ATTACHMENT_SPEC "VolumeAttachmentSpec"
    one(1, "attacher", Str), one(2, "source", m(&VOLUME_ATTACHMENT_SOURCE)),
    one(3, "nodeName", Str),
}

msg! { VOLUME_ATTACHMENT_SOURCE "VolumeAttachmentSource"
    one(1, "persistentVolumeName", Str),
    one(2, "inlineVolumeSpec", m(&super::volume::PERSISTENT_VOLUME_SPEC)),
}

msg! { VOLUME_ATTACHMENT_STATUS "VolumeAttachmentStatus"
    one(1, "attached", Bool), map(2, "attachmentMetadata", &Str),
    one(3, "attachError", m(&VOLUME_ERROR)), one(4, "detachError", m(&VOLUME_ERROR)),
}

msg! { VOLUME_ERROR "VolumeError"
    one(1, "time", Time), one(2, "message", Str), one(3, "errorCode", Int),
}
