//! core/v1 Pod: its spec (containers, probes, scheduling, security) and the status a kubelet
//! writes.

use super::prelude::{Bool, Int, IntOrString, Quantity, Str, Time, inline, m, many, map, msg, one};
use super::{F, Msg};

msg! { POD "Pod"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&POD_SPEC)),
    one(3, "status", m(&POD_STATUS)),
}

msg! { POD_SPEC "PodSpec"
    many(1, "volumes", m(&super::volume::VOLUME)), many(2, "containers", m(&CONTAINER)),
    one(3, "restartPolicy", Str), one(4, "terminationGracePeriodSeconds", Int),
    one(5, "activeDeadlineSeconds", Int), one(6, "dnsPolicy", Str), map(7, "nodeSelector", &Str),
    one(8, "serviceAccountName", Str), one(9, "serviceAccount", Str), one(10, "nodeName", Str),
    one(11, "hostNetwork", Bool), one(12, "hostPID", Bool), one(13, "hostIPC", Bool),
    one(14, "securityContext", m(&POD_SECURITY_CONTEXT)),
    many(15, "imagePullSecrets", m(&super::core::LOCAL_OBJECT_REFERENCE)),
    one(16, "hostname", Str), one(17, "subdomain", Str), one(18, "affinity", m(&AFFINITY)),
    one(19, "schedulerName", Str), many(20, "initContainers", m(&CONTAINER)),
    one(21, "automountServiceAccountToken", Bool), many(22, "tolerations", m(&TOLERATION)),
    many(23, "hostAliases", m(&HOST_ALIAS)), one(24, "priorityClassName", Str),
    one(25, "priority", Int), one(26, "dnsConfig", m(&POD_DNS_CONFIG)),
    one(27, "shareProcessNamespace", Bool), many(28, "readinessGates", m(&POD_READINESS_GATE)),
    one(29, "runtimeClassName", Str), one(30, "enableServiceLinks", Bool),
    one(31, "preemptionPolicy", Str), map(32, "overhead", &Quantity),
    many(33, "topologySpreadConstraints", m(&TOPOLOGY_SPREAD_CONSTRAINT)),
    many(34, "ephemeralContainers", m(&EPHEMERAL_CONTAINER)), one(35, "setHostnameAsFQDN", Bool),
    one(36, "os", m(&POD_OS)), one(37, "hostUsers", Bool),
    many(38, "schedulingGates", m(&POD_SCHEDULING_GATE)),
    many(39, "resourceClaims", m(&POD_RESOURCE_CLAIM)),
    one(40, "resources", m(&RESOURCE_REQUIREMENTS)),
}

/// The fields of a Container, which an EphemeralContainerCommon has too, with the same numbers.
#[rustfmt::skip]
const CONTAINER_FIELDS: &[F] = &[
    one(1, "name", Str), one(2, "image", Str), many(3, "command", Str), many(4, "args", Str),
    one(5, "workingDir", Str), many(6, "ports", m(&CONTAINER_PORT)), many(7, "env", m(&ENV_VAR)),
    one(8, "resources", m(&RESOURCE_REQUIREMENTS)), many(9, "volumeMounts", m(&VOLUME_MOUNT)),
    one(10, "livenessProbe", m(&PROBE)), one(11, "readinessProbe", m(&PROBE)),
    one(12, "lifecycle", m(&LIFECYCLE)), one(13, "terminationMessagePath", Str),
    one(14, "imagePullPolicy", Str), one(15, "securityContext", m(&SECURITY_CONTEXT)),
    one(16, "stdin", Bool), one(17, "stdinOnce", Bool), one(18, "tty", Bool),
    many(19, "envFrom", m(&ENV_FROM_SOURCE)), one(20, "terminationMessagePolicy", Str),
    many(21, "volumeDevices", m(&VOLUME_DEVICE)), one(22, "startupProbe", m(&PROBE)),
    many(23, "resizePolicy", m(&CONTAINER_RESIZE_POLICY)), one(24, "restartPolicy", Str),
];

pub(super) static CONTAINER: Msg = Msg {
    name: "Container",
    fields: CONTAINER_FIELDS,
};

msg! { CONTAINER_PORT "ContainerPort"
    one(1, "name", Str), one(2, "hostPort", Int), one(3, "containerPort", Int),
    one(4, "protocol", Str), one(5, "hostIP", Str),
}

msg! { ENV_FROM_SOURCE "EnvFromSource"
    one(1, "prefix", Str), one(2, "configMapRef", m(&CONFIG_MAP_ENV_SOURCE)),
    one(3, "secretRef", m(&SECRET_ENV_SOURCE)),
}

msg! { CONFIG_MAP_ENV_SOURCE "ConfigMapEnvSource"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), one(2, "optional", Bool),
}

msg! { SECRET_ENV_SOURCE "SecretEnvSource"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), one(2, "optional", Bool),
}

msg! { ENV_VAR "EnvVar"
    one(1, "name", Str), one(2, "value", Str), one(3, "valueFrom", m(&ENV_VAR_SOURCE)),
}

msg! { ENV_VAR_SOURCE "EnvVarSource"
    one(1, "fieldRef", m(&super::core::OBJECT_FIELD_SELECTOR)),
    one(2, "resourceFieldRef", m(&super::core::RESOURCE_FIELD_SELECTOR)),
    one(3, "configMapKeyRef", m(&CONFIG_MAP_KEY_SELECTOR)),
    one(4, "secretKeyRef", m(&SECRET_KEY_SELECTOR)),
}

msg! { CONFIG_MAP_KEY_SELECTOR "ConfigMapKeySelector"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), one(2, "key", Str), one(3, "optional", Bool),
}

msg! { SECRET_KEY_SELECTOR "SecretKeySelector"
    inline(1, &super::core::LOCAL_OBJECT_REFERENCE), one(2, "key", Str), one(3, "optional", Bool),
}

msg! { RESOURCE_REQUIREMENTS "ResourceRequirements"
    map(1, "limits", &Quantity), map(2, "requests", &Quantity),
    many(3, "claims", m(&RESOURCE_CLAIM)),
}

msg! { RESOURCE_CLAIM "ResourceClaim"
    one(1, "name", Str), one(2, "request", Str),
}

msg! { CONTAINER_RESIZE_POLICY "ContainerResizePolicy"
    one(1, "resourceName", Str), one(2, "restartPolicy", Str),
}

msg! { VOLUME_MOUNT "VolumeMount"
    one(1, "name", Str), one(2, "readOnly", Bool), one(3, "mountPath", Str),
    one(4, "subPath", Str), one(5, "mountPropagation", Str), one(6, "subPathExpr", Str),
    one(7, "recursiveReadOnly", Str),
}

msg! { VOLUME_DEVICE "VolumeDevice"
    one(1, "name", Str), one(2, "devicePath", Str),
}

msg! { PROBE "Probe"
    inline(1, &PROBE_HANDLER), one(2, "initialDelaySeconds", Int), one(3, "timeoutSeconds", Int),
    one(4, "periodSeconds", Int), one(5, "successThreshold", Int), one(6, "failureThreshold", Int),
    one(7, "terminationGracePeriodSeconds", Int),
}

msg! { PROBE_HANDLER "ProbeHandler"
    one(1, "exec", m(&EXEC_ACTION)), one(2, "httpGet", m(&HTTP_GET_ACTION)),
    one(3, "tcpSocket", m(&TCP_SOCKET_ACTION)), one(4, "grpc", m(&GRPC_ACTION)),
}

msg! { EXEC_ACTION "ExecAction"
    many(1, "command", Str),
}

msg! { HTTP_GET_ACTION "HTTPGetAction"
    one(1, "path", Str), one(2, "port", IntOrString), one(3, "host", Str), one(4, "scheme", Str),
    many(5, "httpHeaders", m(&HTTP_HEADER)),
}

msg! { HTTP_HEADER "HTTPHeader"
    one(1, "name", Str), one(2, "value", Str),
}

msg! { TCP_SOCKET_ACTION "TCPSocketAction"
    one(1, "port", IntOrString), one(2, "host", Str),
}

msg! { GRPC_ACTION "GRPCAction"
    one(1, "port", Int), one(2, "service", Str),
}

msg! { LIFECYCLE "Lifecycle"
    one(1, "postStart", m(&LIFECYCLE_HANDLER)), one(2, "preStop", m(&LIFECYCLE_HANDLER)),
    one(3, "stopSignal", Str),
}

msg! { LIFECYCLE_HANDLER "LifecycleHandler"
    one(1, "exec", m(&EXEC_ACTION)), one(2, "httpGet", m(&HTTP_GET_ACTION)),
    one(3, "tcpSocket", m(&TCP_SOCKET_ACTION)), one(4, "sleep", m(&SLEEP_ACTION)),
}

msg! { SLEEP_ACTION "SleepAction"
    one(1, "seconds", Int),
}

msg! { SECURITY_CONTEXT "SecurityContext"
    one(1, "capabilities", m(&CAPABILITIES)), one(2, "privileged", Bool),
    one(3, "seLinuxOptions", m(&SE_LINUX_OPTIONS)), one(4, "runAsUser", Int),
    one(5, "runAsNonRoot", Bool), one(6, "readOnlyRootFilesystem", Bool),
    one(7, "allowPrivilegeEscalation", Bool), one(8, "runAsGroup", Int), one(9, "procMount", Str),
    one(10, "windowsOptions", m(&WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    one(11, "seccompProfile", m(&SECCOMP_PROFILE)),
    one(12, "appArmorProfile", m(&APP_ARMOR_PROFILE)),
}

msg! { CAPABILITIES "Capabilities"
    many(1, "add", Str), many(2, "drop", Str),
}

msg! { SE_LINUX_OPTIONS "SELinuxOptions"
    one(1, "user", Str), one(2, "role", Str), one(3, "type", Str), one(4, "level", Str),
}

msg! { WINDOWS_SECURITY_CONTEXT_OPTIONS "WindowsSecurityContextOptions"
    one(1, "gmsaCredentialSpecName", Str), one(2, "gmsaCredentialSpec", Str),
    one(3, "runAsUserName", Str), one(4, "hostProcess", Bool),
}

msg! { SECCOMP_PROFILE "SeccompProfile"
    one(1, "type", Str), one(2, "localhostProfile", Str),
}

msg! { APP_ARMOR_PROFILE "AppArmorProfile"
    one(1, "type", Str), one(2, "localhostProfile", Str),
}

msg! { EPHEMERAL_CONTAINER "EphemeralContainer"
    inline(1, &EPHEMERAL_CONTAINER_COMMON), one(2, "targetContainerName", Str),
}

pub(super) static EPHEMERAL_CONTAINER_COMMON: Msg = Msg {
    name: "EphemeralContainerCommon",
    fields: CONTAINER_FIELDS,
};

msg! { POD_SECURITY_CONTEXT "PodSecurityContext"
    one(1, "seLinuxOptions", m(&SE_LINUX_OPTIONS)), one(2, "runAsUser", Int),
    one(3, "runAsNonRoot", Bool), many(4, "supplementalGroups", Int), one(5, "fsGroup", Int),
    one(6, "runAsGroup", Int), many(7, "sysctls", m(&SYSCTL)),
    one(8, "windowsOptions", m(&WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    one(9, "fsGroupChangePolicy", Str), one(10, "seccompProfile", m(&SECCOMP_PROFILE)),
    one(11, "appArmorProfile", m(&APP_ARMOR_PROFILE)), one(12, "supplementalGroupsPolicy", Str),
    one(13, "seLinuxChangePolicy", Str),
}

msg! { SYSCTL "Sysctl"
    one(1, "name", Str), one(2, "value", Str),
}

msg! { AFFINITY "Affinity"
    one(1, "nodeAffinity", m(&NODE_AFFINITY)), one(2, "podAffinity", m(&POD_AFFINITY)),
    one(3, "podAntiAffinity", m(&POD_ANTI_AFFINITY)),
}

msg! { NODE_AFFINITY "NodeAffinity"
    one(1, "requiredDuringSchedulingIgnoredDuringExecution", m(&super::volume::NODE_SELECTOR)),
    many(2, "preferredDuringSchedulingIgnoredDuringExecution", m(&PREFERRED_SCHEDULING_TERM)),
}

msg! { PREFERRED_SCHEDULING_TERM "PreferredSchedulingTerm"
    one(1, "weight", Int), one(2, "preference", m(&super::volume::NODE_SELECTOR_TERM)),
}

msg! { POD_AFFINITY "PodAffinity"
    many(1, "requiredDuringSchedulingIgnoredDuringExecution", m(&POD_AFFINITY_TERM)),
    many(2, "preferredDuringSchedulingIgnoredDuringExecution", m(&WEIGHTED_POD_AFFINITY_TERM)),
}

msg! { POD_AFFINITY_TERM "PodAffinityTerm"
    one(1, "labelSelector", m(&super::meta::LABEL_SELECTOR)), many(2, "namespaces", Str),
    one(3, "topologyKey", Str), one(4, "namespaceSelector", m(&super::meta::LABEL_SELECTOR)),
    many(5, "matchLabelKeys", Str), many(6, "mismatchLabelKeys", Str),
}

msg! { WEIGHTED_POD_AFFINITY_TERM "WeightedPodAffinityTerm"
    one(1, "weight", Int), one(2, "podAffinityTerm", m(&POD_AFFINITY_TERM)),
}

msg! { POD_ANTI_AFFINITY "PodAntiAffinity"
    many(1, "requiredDuringSchedulingIgnoredDuringExecution", m(&POD_AFFINITY_TERM)),
    many(2, "preferredDuringSchedulingIgnoredDuringExecution", m(&WEIGHTED_POD_AFFINITY_TERM)),
}

msg! { TOLERATION "Toleration"
    one(1, "key", Str), one(2, "operator", Str), one(3, "value", Str), one(4, "effect", Str),
    one(5, "tolerationSeconds", Int),
}

msg! { HOST_ALIAS "HostAlias"
    one(1, "ip", Str), many(2, "hostnames", Str),
}

msg! { POD_DNS_CONFIG "PodDNSConfig"
    many(1, "nameservers", Str), many(2, "searches", Str),
    many(3, "options", m(&POD_DNS_CONFIG_OPTION)),
}

msg! { POD_DNS_CONFIG_OPTION "PodDNSConfigOption"
    one(1, "name", Str), one(2, "value", Str),
}

msg! { POD_READINESS_GATE "PodReadinessGate"
    one(1, "conditionType", Str),
}

msg! { TOPOLOGY_SPREAD_CONSTRAINT "TopologySpreadConstraint"
    one(1, "maxSkew", Int), one(2, "topologyKey", Str), one(3, "whenUnsatisfiable", Str),
    one(4, "labelSelector", m(&super::meta::LABEL_SELECTOR)), one(5, "minDomains", Int),
    one(6, "nodeAffinityPolicy", Str), one(7, "nodeTaintsPolicy", Str),
    many(8, "matchLabelKeys", Str),
}

msg! { POD_OS "PodOS"
    one(1, "name", Str),
}

msg! { POD_SCHEDULING_GATE "PodSchedulingGate"
    one(1, "name", Str),
}

msg! { POD_RESOURCE_CLAIM "PodResourceClaim"
    one(1, "name", Str), one(3, "resourceClaimName", Str),
    one(4, "resourceClaimTemplateName", Str),
}

msg! { POD_STATUS "PodStatus"
    one(1, "phase", Str), many(2, "conditions", m(&POD_CONDITION)), one(3, "message", Str),
    one(4, "reason", Str), one(5, "hostIP", Str), one(6, "podIP", Str), one(7, "startTime", Time),
    many(8, "containerStatuses", m(&CONTAINER_STATUS)), one(9, "qosClass", Str),
    many(10, "initContainerStatuses", m(&CONTAINER_STATUS)), one(11, "nominatedNodeName", Str),
    many(12, "podIPs", m(&POD_IP)), many(13, "ephemeralContainerStatuses", m(&CONTAINER_STATUS)),
    one(14, "resize", Str), many(15, "resourceClaimStatuses", m(&POD_RESOURCE_CLAIM_STATUS)),
    many(16, "hostIPs", m(&HOST_IP)), one(17, "observedGeneration", Int),
}

msg! { POD_CONDITION "PodCondition"
    one(1, "type", Str), one(2, "status", Str), one(3, "lastProbeTime", Time),
    one(4, "lastTransitionTime", Time), one(5, "reason", Str), one(6, "message", Str),
    one(7, "observedGeneration", Int),
}

msg! { HOST_IP "HostIP"
    one(1, "ip", Str),
}

msg! { POD_IP "PodIP"
    one(1, "ip", Str),
}

msg! { CONTAINER_STATUS "ContainerStatus"
    one(1, "name", Str), one(2, "state", m(&CONTAINER_STATE)),
    one(3, "lastState", m(&CONTAINER_STATE)), one(4, "ready", Bool), one(5, "restartCount", Int),
    one(6, "image", Str), one(7, "imageID", Str), one(8, "containerID", Str),
    one(9, "started", Bool), map(10, "allocatedResources", &Quantity),
    one(11, "resources", m(&RESOURCE_REQUIREMENTS)),
    many(12, "volumeMounts", m(&VOLUME_MOUNT_STATUS)), one(13, "user", m(&CONTAINER_USER)),
    many(14, "allocatedResourcesStatus", m(&RESOURCE_STATUS)), one(15, "stopSignal", Str),
}

msg! { CONTAINER_STATE "ContainerState"
    one(1, "waiting", m(&CONTAINER_STATE_WAITING)), one(2, "running", m(&CONTAINER_STATE_RUNNING)),
    one(3, "terminated", m(&CONTAINER_STATE_TERMINATED)),
}

msg! { CONTAINER_STATE_WAITING "ContainerStateWaiting"
    one(1, "reason", Str), one(2, "message", Str),
}

msg! { CONTAINER_STATE_RUNNING "ContainerStateRunning"
    one(1, "startedAt", Time),
}

msg! { CONTAINER_STATE_TERMINATED "ContainerStateTerminated"
    one(1, "exitCode", Int), one(2, "signal", Int), one(3, "reason", Str), one(4, "message", Str),
    one(5, "startedAt", Time), one(6, "finishedAt", Time), one(7, "containerID", Str),
}

msg! { VOLUME_MOUNT_STATUS "VolumeMountStatus"
    one(1, "name", Str), one(2, "mountPath", Str), one(3, "readOnly", Bool),
    one(4, "recursiveReadOnly", Str),
}

msg! { CONTAINER_USER "ContainerUser"
    one(1, "linux", m(&LINUX_CONTAINER_USER)),
}

msg! { LINUX_CONTAINER_USER "LinuxContainerUser"
    one(1, "uid", Int), one(2, "gid", Int), many(3, "supplementalGroups", Int),
}

msg! { RESOURCE_STATUS "ResourceStatus"
    one(1, "name", Str), many(2, "resources", m(&RESOURCE_HEALTH)),
}

msg! { RESOURCE_HEALTH "ResourceHealth"
    one(1, "resourceID", Str), one(2, "health", Str),
}

msg! { POD_RESOURCE_CLAIM_STATUS "PodResourceClaimStatus"
    one(1, "name", Str), one(2, "resourceClaimName", Str),
}

msg! { TOPOLOGY_SELECTOR_TERM "TopologySelectorTerm"
    many(1, "matchLabelExpressions", m(&TOPOLOGY_SELECTOR_LABEL_REQUIREMENT)),
}

msg! { TOPOLOGY_SELECTOR_LABEL_REQUIREMENT "TopologySelectorLabelRequirement"
    one(1, "key", Str), many(2, "values", Str),
}
