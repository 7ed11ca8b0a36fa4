//! core/v1 kinds other than pods and volumes: Namespace, Secret, ServiceAccount, Node, Event
//! and the Binding of `pods/binding`.

use super::prelude::{Bool, Bytes, Int, MicroTime, Quantity, Str, Time, m, many, map, msg, one};

msg! { NAMESPACE "Namespace"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&NAMESPACE_SPEC)),
    one(3, "status", m(&NAMESPACE_STATUS)),
}

msg! { NAMESPACE_SPEC "NamespaceSpec"
    many(1, "finalizers", Str),
}

msg! { NAMESPACE_STATUS "NamespaceStatus"
    one(1, "phase", Str), many(2, "conditions", m(&NAMESPACE_CONDITION)),
}

msg! { NAMESPACE_CONDITION "NamespaceCondition"
    one(1, "type", Str), one(2, "status", Str), one(4, "lastTransitionTime", Time),
    one(5, "reason", Str), one(6, "message", Str),
}

msg! { SECRET "Secret"
    one(1, "metadata", m(&super::meta::OBJECT_META)), map(2, "data", &Bytes), one(3, "type", Str),
    map(4, "stringData", &Str), one(5, "immutable", Bool),
}

msg! { SERVICE_ACCOUNT "ServiceAccount"
    one(1, "metadata", m(&super::meta::OBJECT_META)), many(2, "secrets", m(&OBJECT_REFERENCE)),
    many(3, "imagePullSecrets", m(&LOCAL_OBJECT_REFERENCE)),
    one(4, "automountServiceAccountToken", Bool),
}

msg! { OBJECT_REFERENCE "ObjectReference"
    one(1, "kind", Str), one(2, "namespace", Str), one(3, "name", Str), one(4, "uid", Str),
    one(5, "apiVersion", Str), one(6, "resourceVersion", Str), one(7, "fieldPath", Str),
}

msg! { LOCAL_OBJECT_REFERENCE "LocalObjectReference"
    one(1, "name", Str),
}

msg! { NODE "Node"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&NODE_SPEC)),
    one(3, "status", m(&NODE_STATUS)),
}

msg! { NODE_SPEC "NodeSpec"
    one(1, "podCIDR", Str), one(2, "externalID", Str), one(3, "providerID", Str),
    one(4, "unschedulable", Bool), many(5, "taints", m(&TAINT)),
    one(6, "configSource", m(&NODE_CONFIG_SOURCE)), many(7, "podCIDRs", Str),
}

msg! { TAINT "Taint"
    one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Time),
}

msg! { NODE_CONFIG_SOURCE "NodeConfigSource"
    one(2, "configMap", m(&CONFIG_MAP_NODE_CONFIG_SOURCE)),
}

msg! { CONFIG_MAP_NODE_CONFIG_SOURCE "ConfigMapNodeConfigSource"
    one(1, "namespace", Str), one(2, "name", Str), one(3, "uid", Str),
    one(4, "resourceVersion", Str), one(5, "kubeletConfigKey", Str),
}

msg! { NODE_STATUS "NodeStatus"
    map(1, "capacity", &Quantity), map(2, "allocatable", &Quantity), one(3, "phase", Str),
    many(4, "conditions", m(&NODE_CONDITION)), many(5, "addresses", m(&NODE_ADDRESS)),
    one(6, "daemonEndpoints", m(&NODE_DAEMON_ENDPOINTS)), one(7, "nodeInfo", m(&NODE_SYSTEM_INFO)),
    many(8, "images", m(&CONTAINER_IMAGE)), many(9, "volumesInUse", Str),
    many(10, "volumesAttached", m(&ATTACHED_VOLUME)), one(11, "config", m(&NODE_CONFIG_STATUS)),
    many(12, "runtimeHandlers", m(&NODE_RUNTIME_HANDLER)), one(13, "features", m(&NODE_FEATURES)),
}

msg! { NODE_CONDITION "NodeCondition"
    one(1, "type", Str), one(2, "status", Str), one(3, "lastHeartbeatTime", Time),
    one(4, "lastTransitionTime", Time), one(5, "reason", Str), one(6, "message", Str),
}

msg! { NODE_ADDRESS "NodeAddress"
    one(1, "type", Str), one(2, "address", Str),
}

msg! { NODE_DAEMON_ENDPOINTS "NodeDaemonEndpoints"
    one(1, "kubeletEndpoint", m(&DAEMON_ENDPOINT)),
}

msg! { DAEMON_ENDPOINT "DaemonEndpoint"
    one(1, "Port", Int),
}

msg! { NODE_SYSTEM_INFO "NodeSystemInfo"
    one(1, "machineID", Str), one(2, "systemUUID", Str), one(3, "bootID", Str),
    one(4, "kernelVersion", Str), one(5, "osImage", Str), one(6, "containerRuntimeVersion", Str),
    one(7, "kubeletVersion", Str), one(8, "kubeProxyVersion", Str), one(9, "operatingSystem", Str),
    one(10, "architecture", Str), one(11, "swap", m(&NODE_SWAP_STATUS)),
}

msg! { NODE_SWAP_STATUS "NodeSwapStatus"
    one(1, "capacity", Int),
}

msg! { CONTAINER_IMAGE "ContainerImage"
    many(1, "names", Str), one(2, "sizeBytes", Int),
}

msg! { ATTACHED_VOLUME "AttachedVolume"
    one(1, "name", Str), one(2, "devicePath", Str),
}

msg! { NODE_CONFIG_STATUS "NodeConfigStatus"
    one(1, "assigned", m(&NODE_CONFIG_SOURCE)), one(2, "active", m(&NODE_CONFIG_SOURCE)),
    one(3, "lastKnownGood", m(&NODE_CONFIG_SOURCE)), one(4, "error", Str),
}

msg! { NODE_RUNTIME_HANDLER "NodeRuntimeHandler"
    one(1, "name", Str), one(2, "features", m(&NODE_RUNTIME_HANDLER_FEATURES)),
}

msg! { NODE_RUNTIME_HANDLER_FEATURES "NodeRuntimeHandlerFeatures"
    one(1, "recursiveReadOnlyMounts", Bool), one(2, "userNamespaces", Bool),
}

msg! { NODE_FEATURES "NodeFeatures"
    one(1, "supplementalGroupsPolicy", Bool),
}

msg! { EVENT "Event"
    one(1, "metadata", m(&super::meta::OBJECT_META)),
    one(2, "involvedObject", m(&OBJECT_REFERENCE)), one(3, "reason", Str), one(4, "message", Str),
    one(5, "source", m(&EVENT_SOURCE)), one(6, "firstTimestamp", Time),
    one(7, "lastTimestamp", Time), one(8, "count", Int), one(9, "type", Str),
    one(10, "eventTime", MicroTime), one(11, "series", m(&EVENT_SERIES)), one(12, "action", Str),
    one(13, "related", m(&OBJECT_REFERENCE)), one(14, "reportingComponent", Str),
    one(15, "reportingInstance", Str),
}

msg! { EVENT_SOURCE "EventSource"
    one(1, "component", Str), one(2, "host", Str),
}

msg! { EVENT_SERIES "EventSeries"
    one(1, "count", Int), one(2, "lastObservedTime", MicroTime),
}

msg! { BINDING "Binding"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "target", m(&OBJECT_REFERENCE)),
}

// Selectors that a pod's environment and a downward-API volume both use.
msg! { OBJECT_FIELD_SELECTOR "ObjectFieldSelector"
    one(1, "apiVersion", Str), one(2, "fieldPath", Str),
}

msg! { RESOURCE_FIELD_SELECTOR "ResourceFieldSelector"
    one(1, "containerName", Str), one(2, "resource", Str), one(3, "divisor", Quantity),
}
