//! Protobuf test bodies built with the prost types of `k8s-pb` (an encoder independent of the
//! server's tables), their JSON twins, and the create-both-and-compare check.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::apiserver_http::{Answer, Api};
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The protobuf Content-Type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The `k8s\0` magic and the `runtime.Unknown` envelope around a message, as client-go sends.
pub fn body(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// Sends `body` (see [`body`]) to `path` with `method`, as protobuf.
pub async fn send(api: &Api, method: &str, path: &str, body: Vec<u8>) -> Answer {
    api.raw(method, path, Some(PROTOBUF), None, body).await
}

/// Some of a string.
pub fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// Metadata with a name, a label and an empty annotation.
pub fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        labels: BTreeMap::from([("app".into(), "web".into())]),
        annotations: BTreeMap::from([("note".into(), "".into())]),
        ..Default::default()
    })
}

/// A Quantity.
pub fn q(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

/// An int IntOrString.
pub fn port(p: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(p),
        str_val: None,
    })
}

/// A metav1.Time of whole seconds.
pub fn time(secs: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(secs),
        nanos: Some(0),
    })
}

/// A metav1.MicroTime.
pub fn micro(secs: i64, micros: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(secs),
        nanos: Some(micros * 1000),
    })
}

/// The stored object without what the server sets on each create.
pub fn comparable(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "name",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            m.remove(k);
        }
    }
    v
}

/// Creates `proto` (named `NAME-pb`) and `json` (named `NAME-json`) at `path`; both must be
/// stored as the same object.
pub async fn same_as_json(api: &Api, path: &str, proto: Vec<u8>, mut json: Value) -> Value {
    let a = send(api, "POST", path, proto).await;
    assert_eq!(a.code, 201, "{path} protobuf: {}", a.text);
    let name = a.json["metadata"]["name"].as_str().unwrap().to_string();
    json["metadata"]["name"] = json!(format!("{name}-json"));
    let b = api.post(path, &json).await;
    assert_eq!(b.code, 201, "{path} JSON: {}", b.text);
    let from_proto = api.get(&format!("{path}/{name}")).await.json;
    let from_json = api.get(&format!("{path}/{name}-json")).await.json;
    assert_eq!(
        comparable(from_proto.clone()),
        comparable(from_json),
        "{path}: protobuf and JSON bodies stored differently"
    );
    from_proto
}

/// A container with most of what a workload sets.
pub fn container(name: &str) -> core::Container {
    core::Container {
        name: s(name),
        image: s("busybox:1.36"),
        command: vec!["sh".into(), "-c".into()],
        args: vec!["sleep 3600".into()],
        working_dir: s("/work"),
        ports: vec![core::ContainerPort {
            name: s("http"),
            container_port: Some(8080),
            protocol: s("TCP"),
            ..Default::default()
        }],
        env: vec![
            core::EnvVar {
                name: s("MODE"),
                value: s("fast"),
                value_from: None,
            },
            core::EnvVar {
                name: s("TOKEN"),
                value: None,
                value_from: Some(core::EnvVarSource {
                    secret_key_ref: Some(core::SecretKeySelector {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: s("creds"),
                        }),
                        key: s("token"),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
            },
        ],
        env_from: vec![core::EnvFromSource {
            prefix: s("CFG_"),
            config_map_ref: Some(core::ConfigMapEnvSource {
                local_object_reference: Some(core::LocalObjectReference {
                    name: s("settings"),
                }),
                optional: Some(true),
            }),
            secret_ref: None,
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([("memory".into(), q("128Mi"))]),
            requests: BTreeMap::from([("cpu".into(), q("100m")), ("memory".into(), q("64Mi"))]),
            claims: vec![],
        }),
        volume_mounts: vec![core::VolumeMount {
            name: s("data"),
            mount_path: s("/data"),
            read_only: Some(true),
            sub_path: s("app"),
            ..Default::default()
        }],
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/healthz"),
                    port: port(8080),
                    scheme: s("HTTP"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(2),
            period_seconds: Some(5),
            ..Default::default()
        }),
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                tcp_socket: Some(core::TcpSocketAction {
                    port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: s("http"),
                    }),
                    host: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        security_context: Some(core::SecurityContext {
            capabilities: Some(core::Capabilities {
                add: vec![],
                drop: vec!["ALL".into()],
            }),
            run_as_non_root: Some(true),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            ..Default::default()
        }),
        image_pull_policy: s("IfNotPresent"),
        ..Default::default()
    }
}

/// `container` as JSON.
pub fn container_json(name: &str) -> Value {
    json!({
        "name": name, "image": "busybox:1.36", "command": ["sh", "-c"], "args": ["sleep 3600"],
        "workingDir": "/work",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [
            {"name": "MODE", "value": "fast"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token", "optional": false}}}
        ],
        "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings", "optional": true}}],
        "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true, "subPath": "app"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 2, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": "http"}},
        "securityContext": {"capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true,
            "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
        "imagePullPolicy": "IfNotPresent"
    })
}

/// A named volume.
pub fn volume(name: &str, source: core::VolumeSource) -> core::Volume {
    core::Volume {
        name: s(name),
        volume_source: Some(source),
    }
}

/// A pod with every commonly used field and volume source.
pub fn rich_pod(name: &str) -> core::Pod {
    let key = |k: &str, p: &str| core::KeyToPath {
        key: s(k),
        path: s(p),
        mode: None,
    };
    core::Pod {
        metadata: meta(name),
        spec: Some(core::PodSpec {
            containers: vec![container("app")],
            init_containers: vec![core::Container {
                name: s("init"),
                image: s("busybox:1.36"),
                command: vec!["true".into()],
                ..Default::default()
            }],
            volumes: vec![
                volume(
                    "data",
                    core::VolumeSource {
                        persistent_volume_claim: Some(core::PersistentVolumeClaimVolumeSource {
                            claim_name: s("data"),
                            read_only: Some(false),
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "scratch",
                    core::VolumeSource {
                        empty_dir: Some(core::EmptyDirVolumeSource {
                            medium: s("Memory"),
                            size_limit: Some(q("1Gi")),
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "cfg",
                    core::VolumeSource {
                        config_map: Some(core::ConfigMapVolumeSource {
                            local_object_reference: Some(core::LocalObjectReference {
                                name: s("settings"),
                            }),
                            items: vec![key("a", "a.conf")],
                            default_mode: Some(0o644),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "sec",
                    core::VolumeSource {
                        secret: Some(core::SecretVolumeSource {
                            secret_name: s("creds"),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "host",
                    core::VolumeSource {
                        host_path: Some(core::HostPathVolumeSource {
                            path: s("/var/log"),
                            r#type: s("Directory"),
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "token",
                    core::VolumeSource {
                        projected: Some(core::ProjectedVolumeSource {
                            sources: vec![core::VolumeProjection {
                                service_account_token: Some(core::ServiceAccountTokenProjection {
                                    audience: s("vault"),
                                    expiration_seconds: Some(3600),
                                    path: s("token"),
                                }),
                                ..Default::default()
                            }],
                            default_mode: None,
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "info",
                    core::VolumeSource {
                        downward_api: Some(core::DownwardAPIVolumeSource {
                            items: vec![core::DownwardAPIVolumeFile {
                                path: s("labels"),
                                field_ref: Some(core::ObjectFieldSelector {
                                    api_version: s("v1"),
                                    field_path: s("metadata.labels"),
                                }),
                                ..Default::default()
                            }],
                            default_mode: None,
                        }),
                        ..Default::default()
                    },
                ),
                volume(
                    "inline",
                    core::VolumeSource {
                        csi: Some(core::CSIVolumeSource {
                            driver: s("hostpath.volhealth.dev"),
                            read_only: Some(true),
                            volume_attributes: BTreeMap::from([("size".into(), "1Gi".into())]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ),
            ],
            node_selector: BTreeMap::from([("disk".into(), "ssd".into())]),
            service_account_name: s("robot"),
            tolerations: vec![core::Toleration {
                key: s("dedicated"),
                operator: s("Equal"),
                value: s("storage"),
                effect: s("NoExecute"),
                toleration_seconds: Some(30),
            }],
            affinity: Some(core::Affinity {
                node_affinity: Some(core::NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                        node_selector_terms: vec![core::NodeSelectorTerm {
                            match_expressions: vec![core::NodeSelectorRequirement {
                                key: s("zone"),
                                operator: s("In"),
                                values: vec!["a".into(), "b".into()],
                            }],
                            match_fields: vec![],
                        }],
                    }),
                    preferred_during_scheduling_ignored_during_execution: vec![],
                }),
                ..Default::default()
            }),
            scheduling_gates: vec![core::PodSchedulingGate { name: s("wait") }],
            priority: Some(100),
            restart_policy: s("Never"),
            termination_grace_period_seconds: Some(10),
            security_context: Some(core::PodSecurityContext {
                run_as_user: Some(1000),
                fs_group: Some(2000),
                supplemental_groups: vec![3000, 3001],
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// `rich_pod` as JSON (without its name).
pub fn rich_pod_json() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
    "spec": {
        "containers": [container_json("app")],
        "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["true"]}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": false}},
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "cfg", "configMap": {"name": "settings", "items": [{"key": "a", "path": "a.conf"}], "defaultMode": 420}},
            {"name": "sec", "secret": {"secretName": "creds"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token"}}]}},
            {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}}]}},
            {"name": "inline", "csi": {"driver": "hostpath.volhealth.dev", "readOnly": true, "volumeAttributes": {"size": "1Gi"}}}
        ],
        "nodeSelector": {"disk": "ssd"},
        "serviceAccountName": "robot",
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "storage", "effect": "NoExecute", "tolerationSeconds": 30}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
        "schedulingGates": [{"name": "wait"}],
        "priority": 100,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 10,
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [3000, 3001]}
    }})
}

/// An ObjectReference.
pub fn obj_ref(kind: &str, ns: &str, name: &str) -> Option<core::ObjectReference> {
    Some(core::ObjectReference {
        kind: s(kind),
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        name: s(name),
        api_version: s("v1"),
        ..Default::default()
    })
}

/// A label selector on `app`.
pub fn selector(app: &str) -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: BTreeMap::from([("app".into(), app.into())]),
        match_expressions: vec![],
    })
}

/// A one-container pod.
pub fn simple_pod(name: &str) -> core::Pod {
    core::Pod {
        metadata: Some(meta::ObjectMeta {
            name: s(name),
            labels: BTreeMap::from([("app".into(), "web".into())]),
            ..Default::default()
        }),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: s("c"),
                image: s("busybox"),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}
