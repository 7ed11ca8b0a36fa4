//! core/v1 volumes: PersistentVolume, PersistentVolumeClaim and the volume sources a pod or a
//! PersistentVolume names.

use super::prelude::{Bool, Int, Quantity, Str, StrKeep, Time, inline, m, many, map, msg, one};

msg! { VOLUME "Volume"
    one(1, "name", Str), inline(2, &VOLUME_SOURCE),
}

msg! { VOLUME_SOURCE "VolumeSource"
    one(1, "hostPath", m(&HOST_PATH_VOLUME_SOURCE)),
    one(2, "emptyDir", m(&EMPTY_DIR_VOLUME_SOURCE)),
    one(3, "gcePersistentDisk", m(&GCE_PERSISTENT_DISK_VOLUME_SOURCE)),
    one(4, "awsElasticBlockStore", m(&AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE)),
    one(5, "gitRepo", m(&GIT_REPO_VOLUME_SOURCE)), one(6, "secret", m(&SECRET_VOLUME_SOURCE)),
    one(7, "nfs", m(&NFS_VOLUME_SOURCE)), one(8, "iscsi", m(&ISCSI_VOLUME_SOURCE)),
    one(9, "glusterfs", m(&GLUSTERFS_VOLUME_SOURCE)),
    one(10, "persistentVolumeClaim", m(&PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE)),
    one(11, "rbd", m(&RBD_VOLUME_SOURCE)), one(12, "flexVolume", m(&FLEX_VOLUME_SOURCE)),
    one(13, "cinder", m(&CINDER_VOLUME_SOURCE)), one(14, "cephfs", m(&CEPH_FS_VOLUME_SOURCE)),
    one(15, "flocker", m(&FLOCKER_VOLUME_SOURCE)),
    one(16, "downwardAPI", m(&DOWNWARD_API_VOLUME_SOURCE)), one(17, "fc", m(&FC_VOLUME_SOURCE)),
    one(18, "azureFile", m(&AZURE_FILE_VOLUME_SOURCE)),
    one(19, "configMap", m(&CONFIG_MAP_VOLUME_SOURCE)),
    one(20, "vsphereVolume", m(&VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
    one(21, "quobyte", m(&QUOBYTE_VOLUME_SOURCE)),
    one(22, "azureDisk", m(&AZURE_DISK_VOLUME_SOURCE)),
    one(23, "photonPersistentDisk", m(&PHOTON_PERSISTENT_DISK_VOLUME_SOURCE)),
    one(24, "portworxVolume", m(&PORTWORX_VOLUME_SOURCE)),
    one(25, "scaleIO", m(&SCALE_IO_VOLUME_SOURCE)),
    one(26, "projected", m(&PROJECTED_VOLUME_SOURCE)),
    one(27, "storageos", m(&STORAGE_OS_VOLUME_SOURCE)), one(28, "csi", m(&CSI_VOLUME_SOURCE)),
    one(29, "ephemeral", m(&EPHEMERAL_VOLUME_SOURCE)), one(30, "image", m(&IMAGE_VOLUME_SOURCE)),
}

msg! { HOST_PATH_VOLUME_SOURCE "HostPathVolumeSource"
    one(1, "path", Str), one(2, "type", Str),
}

msg! { EMPTY_DIR_VOLUME_SOURCE "EmptyDirVolumeSource"
    one(1, "medium", Str), one(2, "sizeLimit", Quantity),
}

msg! { GCE_PERSISTENT_DISK_VOLUME_SOURCE "GCEPersistentDiskVolumeSource"
    one(1, "pdName", Str), one(2, "fsType", Str), one(3, "partition", Int),
    one(4, "readOnly", Bool),
}

msg! { AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE "AWSElasticBlockStoreVolumeSource"
    one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "partition", Int),
    one(4, "readOnly", Bool),
}

msg! { GIT_REPO_VOLUME_SOURCE "GitRepoVolumeSource"
    one(1, "repository", Str), one(2, "revision", Str), one(3, "directory", Str),
}

msg! { SECRET_VOLUME_SOURCE "SecretVolumeSource"
    one(1, "secretName", Str), many(2, "items", m(&KEY_TO_PATH)), one(3, "defaultMode", Int),
    one(4, "optional", Bool),
}

msg! { KEY_TO_PATH "KeyToPath"
    one(1, "key", Str), one(2, "path", Str), one(3, "mode", Int),
}

msg! { NFS_VOLUME_SOURCE "NFSVolumeSource"
    one(1, "server", Str), one(2, "path", Str), one(3, "readOnly", Bool),
}

msg! { ISCSI_VOLUME_SOURCE "ISCSIVolumeSource"
    one(1, "targetPortal", Str), one(2, "iqn", Str), one(3, "lun", Int),
    one(4, "iscsiInterface", Str), one(5, "fsType", Str), one(6, "readOnly", Bool),
    many(7, "portals", Str), one(8, "chapAuthDiscovery", Bool),
    one(10, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)),
    one(11, "chapAuthSession", Bool), one(12, "initiatorName", Str),
}

msg! { GLUSTERFS_VOLUME_SOURCE "GlusterfsVolumeSource"
    one(1, "endpoints", Str), one(2, "path", Str), one(3, "readOnly", Bool),
}

msg! { PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE "PersistentVolumeClaimVolumeSource"
    one(1, "claimName", Str), one(2, "readOnly", Bool),
}

msg! { RBD_VOLUME_SOURCE "RBDVolumeSource"
    many(1, "monitors", Str), one(2, "image", Str), one(3, "fsType", Str), one(4, "pool", Str),
    one(5, "user", Str), one(6, "keyring", Str),
    one(7, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)), one(8, "readOnly", Bool),
}

msg! { FLEX_VOLUME_SOURCE "FlexVolumeSource"
    one(1, "driver", Str), one(2, "fsType", Str),
    one(3, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)), one(4, "readOnly", Bool),
    map(5, "options", &Str),
}

msg! { CINDER_VOLUME_SOURCE "CinderVolumeSource"
    one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool),
    one(4, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)),
}

msg! { CEPH_FS_VOLUME_SOURCE "CephFSVolumeSource"
    many(1, "monitors", Str), one(2, "path", Str), one(3, "user", Str), one(4, "secretFile", Str),
    one(5, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)), one(6, "readOnly", Bool),
}

msg! { FLOCKER_VOLUME_SOURCE "FlockerVolumeSource"
    one(1, "datasetName", Str), one(2, "datasetUUID", Str),
}

msg! { DOWNWARD_API_VOLUME_SOURCE "DownwardAPIVolumeSource"
    many(1, "items", m(&DOWNWARD_API_VOLUME_FILE)), one(2, "defaultMode", Int),
}

msg! { DOWNWARD_API_VOLUME_FILE "DownwardAPIVolumeFile"
    one(1, "path", Str), one(2, "fieldRef", m(&super::core::OBJECT_FIELD_SELECTOR)),
    one(3, "resourceFieldRef", m(&super::core::RESOURCE_FIELD_SELECTOR)), one(4, "mode", Int),
}

msg! { FC_VOLUME_SOURCE "FCVolumeSource"
    many(1, "targetWWNs", Str), one(2, "lun", Int), one(3, "fsType", Str),
    one(4, "readOnly", Bool), many(5, "wwids", Str),
}

msg! { AZURE_FILE_VOLUME_SOURCE "AzureFileVolumeSource"
    one(1, "secretName", Str), one(2, "shareName", Str), one(3, "readOnly", Bool),
}

msg! { CONFIG_MAP_VOLUME_SOURCE "ConfigMapVolumeSource"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), many(2, "items", m(&KEY_TO_PATH)),
    one(3, "defaultMode", Int), one(4, "optional", Bool),
}

msg! { VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE "VsphereVirtualDiskVolumeSource"
    one(1, "volumePath", Str), one(2, "fsType", Str), one(3, "storagePolicyName", Str),
    one(4, "storagePolicyID", Str),
}

msg! { QUOBYTE_VOLUME_SOURCE "QuobyteVolumeSource"
    one(1, "registry", Str), one(2, "volume", Str), one(3, "readOnly", Bool), one(4, "user", Str),
    one(5, "group", Str), one(6, "tenant", Str),
}

msg! { AZURE_DISK_VOLUME_SOURCE "AzureDiskVolumeSource"
    one(1, "diskName", Str), one(2, "diskURI", Str), one(3, "cachingMode", Str),
    one(4, "fsType", Str), one(5, "readOnly", Bool), one(6, "kind", Str),
}

msg! { PHOTON_PERSISTENT_DISK_VOLUME_SOURCE "PhotonPersistentDiskVolumeSource"
    one(1, "pdID", Str), one(2, "fsType", Str),
}

msg! { PROJECTED_VOLUME_SOURCE "ProjectedVolumeSource"
    many(1, "sources", m(&VOLUME_PROJECTION)), one(2, "defaultMode", Int),
}

msg! { VOLUME_PROJECTION "VolumeProjection"
    one(1, "secret", m(&SECRET_PROJECTION)), one(2, "downwardAPI", m(&DOWNWARD_API_PROJECTION)),
    one(3, "configMap", m(&CONFIG_MAP_PROJECTION)),
    one(4, "serviceAccountToken", m(&SERVICE_ACCOUNT_TOKEN_PROJECTION)),
    one(5, "clusterTrustBundle", m(&CLUSTER_TRUST_BUNDLE_PROJECTION)),
}

msg! { SECRET_PROJECTION "SecretProjection"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), many(2, "items", m(&KEY_TO_PATH)),
    one(4, "optional", Bool),
}

msg! { DOWNWARD_API_PROJECTION "DownwardAPIProjection"
    many(1, "items", m(&DOWNWARD_API_VOLUME_FILE)),
}

msg! { CONFIG_MAP_PROJECTION "ConfigMapProjection"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), many(2, "items", m(&KEY_TO_PATH)),
    one(4, "optional", Bool),
}

msg! { SERVICE_ACCOUNT_TOKEN_PROJECTION "ServiceAccountTokenProjection"
    one(1, "audience", Str), one(2, "expirationSeconds", Int), one(3, "path", Str),
}

msg! { CLUSTER_TRUST_BUNDLE_PROJECTION "ClusterTrustBundleProjection"
    one(1, "name", Str), one(2, "signerName", Str),
    one(3, "labelSelector", m(&super::meta::LABEL_SELECTOR)), one(4, "path", Str),
    one(5, "optional", Bool),
}

msg! { PORTWORX_VOLUME_SOURCE "PortworxVolumeSource"
    one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool),
}

msg! { SCALE_IO_VOLUME_SOURCE "ScaleIOVolumeSource"
    one(1, "gateway", Str), one(2, "system", Str),
    one(3, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)), one(4, "sslEnabled", Bool),
    one(5, "protectionDomain", Str), one(6, "storagePool", Str), one(7, "storageMode", Str),
    one(8, "volumeName", Str), one(9, "fsType", Str), one(10, "readOnly", Bool),
}

msg! { STORAGE_OS_VOLUME_SOURCE "StorageOSVolumeSource"
    one(1, "volumeName", Str), one(2, "volumeNamespace", Str), one(3, "fsType", Str),
    one(4, "readOnly", Bool), one(5, "secretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)),
}

msg! { CSI_VOLUME_SOURCE "CSIVolumeSource"
    one(1, "driver", Str), one(2, "readOnly", Bool), one(3, "fsType", Str),
    map(4, "volumeAttributes", &Str),
    one(5, "nodePublishSecretRef", m(&super::core::LOCAL_OBJECT_REFERENCE)),
}

msg! { EPHEMERAL_VOLUME_SOURCE "EphemeralVolumeSource"
    one(1, "volumeClaimTemplate", m(&PERSISTENT_VOLUME_CLAIM_TEMPLATE)),
}

msg! { PERSISTENT_VOLUME_CLAIM_TEMPLATE "PersistentVolumeClaimTemplate"
    one(1, "metadata", m(&super::meta::OBJECT_META)),
    one(2, "spec", m(&PERSISTENT_VOLUME_CLAIM_SPEC)),
}

msg! { PERSISTENT_VOLUME_CLAIM_SPEC "PersistentVolumeClaimSpec"
    many(1, "accessModes", Str), one(2, "resources", m(&VOLUME_RESOURCE_REQUIREMENTS)),
    one(3, "volumeName", Str), one(4, "selector", m(&super::meta::LABEL_SELECTOR)),
    one(5, "storageClassName", StrKeep), one(6, "volumeMode", Str),
    one(7, "dataSource", m(&TYPED_LOCAL_OBJECT_REFERENCE)),
    one(8, "dataSourceRef", m(&TYPED_OBJECT_REFERENCE)), one(9, "volumeAttributesClassName", Str),
}

msg! { VOLUME_RESOURCE_REQUIREMENTS "VolumeResourceRequirements"
    map(1, "limits", &Quantity), map(2, "requests", &Quantity),
}

msg! { TYPED_LOCAL_OBJECT_REFERENCE "TypedLocalObjectReference"
    one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str),
}

msg! { TYPED_OBJECT_REFERENCE "TypedObjectReference"
    one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), one(4, "namespace", Str),
}

msg! { IMAGE_VOLUME_SOURCE "ImageVolumeSource"
    one(1, "reference", Str), one(2, "pullPolicy", Str),
}

msg! { NODE_SELECTOR "NodeSelector"
    many(1, "nodeSelectorTerms", m(&NODE_SELECTOR_TERM)),
}

msg! { NODE_SELECTOR_TERM "NodeSelectorTerm"
    many(1, "matchExpressions", m(&NODE_SELECTOR_REQUIREMENT)),
    many(2, "matchFields", m(&NODE_SELECTOR_REQUIREMENT)),
}

msg! { NODE_SELECTOR_REQUIREMENT "NodeSelectorRequirement"
    one(1, "key", Str), one(2, "operator", Str), many(3, "values", Str),
}

msg! { PERSISTENT_VOLUME_CLAIM "PersistentVolumeClaim"
    one(1, "metadata", m(&super::meta::OBJECT_META)),
    one(2, "spec", m(&PERSISTENT_VOLUME_CLAIM_SPEC)),
    one(3, "status", m(&PERSISTENT_VOLUME_CLAIM_STATUS)),
}

msg! { PERSISTENT_VOLUME_CLAIM_STATUS "PersistentVolumeClaimStatus"
    one(1, "phase", Str), many(2, "accessModes", Str), map(3, "capacity", &Quantity),
    many(4, "conditions", m(&PERSISTENT_VOLUME_CLAIM_CONDITION)),
    map(5, "allocatedResources", &Quantity), map(7, "allocatedResourceStatuses", &Str),
    one(8, "currentVolumeAttributesClassName", Str),
    one(9, "modifyVolumeStatus", m(&MODIFY_VOLUME_STATUS)),
}

msg! { PERSISTENT_VOLUME_CLAIM_CONDITION "PersistentVolumeClaimCondition"
    one(1, "type", Str), one(2, "status", Str), one(3, "lastProbeTime", Time),
    one(4, "lastTransitionTime", Time), one(5, "reason", Str), one(6, "message", Str),
}

msg! { MODIFY_VOLUME_STATUS "ModifyVolumeStatus"
    one(1, "targetVolumeAttributesClassName", Str), one(2, "status", Str),
}

msg! { PERSISTENT_VOLUME "PersistentVolume"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&PERSISTENT_VOLUME_SPEC)),
    one(3, "status", m(&PERSISTENT_VOLUME_STATUS)),
}

msg! { PERSISTENT_VOLUME_SPEC "PersistentVolumeSpec"
    map(1, "capacity", &Quantity), inline(2, &PERSISTENT_VOLUME_SOURCE),
    many(3, "accessModes", Str), one(4, "claimRef", m(&super::core::OBJECT_REFERENCE)),
    one(5, "persistentVolumeReclaimPolicy", Str), one(6, "storageClassName", Str),
    many(7, "mountOptions", Str), one(8, "volumeMode", Str),
    one(9, "nodeAffinity", m(&VOLUME_NODE_AFFINITY)), one(10, "volumeAttributesClassName", Str),
}

msg! { PERSISTENT_VOLUME_SOURCE "PersistentVolumeSource"
    one(1, "gcePersistentDisk", m(&GCE_PERSISTENT_DISK_VOLUME_SOURCE)),
    one(2, "awsElasticBlockStore", m(&AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE)),
    one(3, "hostPath", m(&HOST_PATH_VOLUME_SOURCE)),
    one(4, "glusterfs", m(&GLUSTERFS_PERSISTENT_VOLUME_SOURCE)),
    one(5, "nfs", m(&NFS_VOLUME_SOURCE)), one(6, "rbd", m(&RBD_PERSISTENT_VOLUME_SOURCE)),
    one(7, "iscsi", m(&ISCSI_PERSISTENT_VOLUME_SOURCE)),
    one(8, "cinder", m(&CINDER_PERSISTENT_VOLUME_SOURCE)),
    one(9, "cephfs", m(&CEPH_FS_PERSISTENT_VOLUME_SOURCE)), one(10, "fc", m(&FC_VOLUME_SOURCE)),
    one(11, "flocker", m(&FLOCKER_VOLUME_SOURCE)),
    one(12, "flexVolume", m(&FLEX_PERSISTENT_VOLUME_SOURCE)),
    one(13, "azureFile", m(&AZURE_FILE_PERSISTENT_VOLUME_SOURCE)),
    one(14, "vsphereVolume", m(&VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
    one(15, "quobyte", m(&QUOBYTE_VOLUME_SOURCE)),
    one(16, "azureDisk", m(&AZURE_DISK_VOLUME_SOURCE)),
    one(17, "photonPersistentDisk", m(&PHOTON_PERSISTENT_DISK_VOLUME_SOURCE)),
    one(18, "portworxVolume", m(&PORTWORX_VOLUME_SOURCE)),
    one(19, "scaleIO", m(&SCALE_IO_PERSISTENT_VOLUME_SOURCE)),
    one(20, "local", m(&LOCAL_VOLUME_SOURCE)),
    one(21, "storageos", m(&STORAGE_OS_PERSISTENT_VOLUME_SOURCE)),
    one(22, "csi", m(&CSI_PERSISTENT_VOLUME_SOURCE)),
}

msg! { GLUSTERFS_PERSISTENT_VOLUME_SOURCE "GlusterfsPersistentVolumeSource"
    one(1, "endpoints", Str), one(2, "path", Str), one(3, "readOnly", Bool),
    one(4, "endpointsNamespace", Str),
}

msg! { RBD_PERSISTENT_VOLUME_SOURCE "RBDPersistentVolumeSource"
    many(1, "monitors", Str), one(2, "image", Str), one(3, "fsType", Str), one(4, "pool", Str),
    one(5, "user", Str), one(6, "keyring", Str), one(7, "secretRef", m(&SECRET_REFERENCE)),
    one(8, "readOnly", Bool),
}

msg! { SECRET_REFERENCE "SecretReference"
    one(1, "name", Str), one(2, "namespace", Str),
}

msg! { ISCSI_PERSISTENT_VOLUME_SOURCE "ISCSIPersistentVolumeSource"
    one(1, "targetPortal", Str), one(2, "iqn", Str), one(3, "lun", Int),
    one(4, "iscsiInterface", Str), one(5, "fsType", Str), one(6, "readOnly", Bool),
    many(7, "portals", Str), one(8, "chapAuthDiscovery", Bool),
    one(10, "secretRef", m(&SECRET_REFERENCE)), one(11, "chapAuthSession", Bool),
    one(12, "initiatorName", Str),
}

msg! { CINDER_PERSISTENT_VOLUME_SOURCE "CinderPersistentVolumeSource"
    one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool),
    one(4, "secretRef", m(&SECRET_REFERENCE)),
}

msg! { CEPH_FS_PERSISTENT_VOLUME_SOURCE "CephFSPersistentVolumeSource"
    many(1, "monitors", Str), one(2, "path", Str), one(3, "user", Str), one(4, "secretFile", Str),
    one(5, "secretRef", m(&SECRET_REFERENCE)), one(6, "readOnly", Bool),
}

msg! { FLEX_PERSISTENT_VOLUME_SOURCE "FlexPersistentVolumeSource"
    one(1, "driver", Str), one(2, "fsType", Str), one(3, "secretRef", m(&SECRET_REFERENCE)),
    one(4, "readOnly", Bool), map(5, "options", &Str),
}

msg! { AZURE_FILE_PERSISTENT_VOLUME_SOURCE "AzureFilePersistentVolumeSource"
    one(1, "secretName", Str), one(2, "shareName", Str), one(3, "readOnly", Bool),
    one(4, "secretNamespace", Str),
}

msg! { SCALE_IO_PERSISTENT_VOLUME_SOURCE "ScaleIOPersistentVolumeSource"
    one(1, "gateway", Str), one(2, "system", Str), one(3, "secretRef", m(&SECRET_REFERENCE)),
    one(4, "sslEnabled", Bool), one(5, "protectionDomain", Str), one(6, "storagePool", Str),
    one(7, "storageMode", Str), one(8, "volumeName", Str), one(9, "fsType", Str),
    one(10, "readOnly", Bool),
}

msg! { LOCAL_VOLUME_SOURCE "LocalVolumeSource"
    one(1, "path", Str), one(2, "fsType", Str),
}

msg! { STORAGE_OS_PERSISTENT_VOLUME_SOURCE "StorageOSPersistentVolumeSource"
    one(1, "volumeName", Str), one(2, "volumeNamespace", Str), one(3, "fsType", Str),
    one(4, "readOnly", Bool), one(5, "secretRef", m(&super::core::OBJECT_REFERENCE)),
}

msg! { CSI_PERSISTENT_VOLUME_SOURCE "CSIPersistentVolumeSource"
    one(1, "driver", Str), one(2, "volumeHandle", Str), one(3, "readOnly", Bool),
    one(4, "fsType", Str), map(5, "volumeAttributes", &Str),
    one(6, "controllerPublishSecretRef", m(&SECRET_REFERENCE)),
    one(7, "nodeStageSecretRef", m(&SECRET_REFERENCE)),
    one(8, "nodePublishSecretRef", m(&SECRET_REFERENCE)),
    one(9, "controllerExpandSecretRef", m(&SECRET_REFERENCE)),
    one(10, "nodeExpandSecretRef", m(&SECRET_REFERENCE)),
}

msg! { VOLUME_NODE_AFFINITY "VolumeNodeAffinity"
    one(1, "required", m(&NODE_SELECTOR)),
}

msg! { PERSISTENT_VOLUME_STATUS "PersistentVolumeStatus"
    one(1, "phase", Str), one(2, "message", Str), one(3, "reason", Str),
    one(4, "lastPhaseTransitionTime", Time),
}
