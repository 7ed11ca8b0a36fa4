use super::*;

/// Builds protobuf bytes: a key and a payload per field.
fn key(n: u64, wire: u64) -> Vec<u8> {
    varint(n << 3 | wire)
}
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}
fn bytes(n: u64, b: &[u8]) -> Vec<u8> {
    let mut out = key(n, 2);
    out.extend(varint(b.len() as u64));
    out.extend_from_slice(b);
    out
}
fn int(n: u64, v: u64) -> Vec<u8> {
    let mut out = key(n, 0);
    out.extend(varint(v));
    out
}
/// Decodes `raw` as a v1 `kind` of `group`, in the envelope a client sends it in.
fn decode_v1(group: &str, kind: &str, raw: &[u8]) -> Result<Value, ApiError> {
    let api_version = if group.is_empty() {
        "v1".to_string()
    } else {
        format!("{group}/v1")
    };
    decode(group, kind, &envelope(&api_version, kind, raw))
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let tm = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
    [
        MAGIC.to_vec(),
        bytes(1, &tm),
        bytes(2, raw),
        bytes(3, b""),
        bytes(4, b""),
    ]
    .concat()
}

#[test]
fn reads_a_secret_as_kubectl_sends_it() {
    let entry = [bytes(1, b"a"), bytes(2, b"b\x00")].concat();
    let label = [bytes(1, b"app"), bytes(2, b"x")].concat();
    let time = [int(1, 0)].concat();
    let meta = [
        bytes(1, b"s"),
        bytes(2, b""),
        bytes(3, b"default"),
        int(7, 0),
        bytes(8, &time),
        bytes(11, &label),
    ]
    .concat();
    let raw = [
        bytes(1, &meta),
        bytes(2, &entry),
        bytes(3, b"Opaque"),
        int(5, 1),
    ]
    .concat();
    let got = decode_v1("", "Secret", &raw).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default", "labels": {"app": "x"}},
            "data": {"a": "YgA="}, "type": "Opaque", "immutable": true})
    );
}

#[test]
fn reads_a_role_binding_with_lists_and_nested_messages() {
    let subject = [
        bytes(1, b"User"),
        bytes(2, b"rbac.authorization.k8s.io"),
        bytes(3, b"alice"),
    ]
    .concat();
    let role_ref = [
        bytes(1, b"rbac.authorization.k8s.io"),
        bytes(2, b"Role"),
        bytes(3, b"r"),
    ]
    .concat();
    let raw = [
        bytes(1, &bytes(1, b"rb")),
        bytes(2, &subject),
        bytes(2, &subject),
        bytes(3, &role_ref),
    ]
    .concat();
    let got = decode_v1("rbac.authorization.k8s.io", "RoleBinding", &raw).unwrap();
    assert_eq!(got["subjects"].as_array().unwrap().len(), 2);
    assert_eq!(got["subjects"][1]["name"], "alice");
    assert_eq!(
        got["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"})
    );
    let time = [int(1, 1_700_000_000)].concat();
    let raw = [
        bytes(1, &[bytes(1, b"ns"), bytes(8, &time)].concat()),
        bytes(2, &bytes(1, b"kubernetes")),
    ]
    .concat();
    let got = decode_v1("", "Namespace", &raw).unwrap();
    assert_eq!(got["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
    assert_eq!(got["spec"], json!({"finalizers": ["kubernetes"]}));
}

#[test]
fn unknown_fields_are_refused_not_dropped() {
    let raw = [bytes(1, &bytes(1, b"s")), bytes(99, b"x")].concat();
    let e = decode_v1("", "Secret", &raw).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("unknown field number 99 in Secret"),
        "{}",
        e.message
    );
    let raw = bytes(1, &int(16, 1));
    let e = decode_v1("", "Secret", &raw).unwrap_err();
    assert!(e.message.contains("in ObjectMeta"), "{}", e.message);
    // A string field sent as a varint: the wrong wire type.
    let raw = bytes(1, &int(1, 5));
    assert_eq!(decode_v1("", "Secret", &raw).unwrap_err().code, 400);
}

#[test]
fn kinds_without_tables_are_415() {
    let e = decode(
        "apps",
        "Deployment",
        &envelope("apps/v1", "Deployment", b""),
    )
    .unwrap_err();
    assert_eq!(e.code, 415);
    // Every kind the server stores has a table.
    for def in crate::registry::RESOURCES {
        if def.printer == crate::registry::Printer::Review {
            continue;
        }
        let av = if def.group.is_empty() {
            "v1".to_string()
        } else {
            format!("{}/v1", def.group)
        };
        let got = decode(def.group, def.kind, &envelope(&av, def.kind, b""));
        assert!(got.is_ok(), "{}/{}: {:?}", def.group, def.kind, got.err());
    }
}

#[test]
fn special_wire_types_read_as_go_writes_their_json() {
    // A pod: IntOrString both ways, a Quantity map, a packed and an unpacked int list, and a
    // negative int32 (sign-extended to ten bytes on the wire).
    let port_int = [int(1, 0), int(2, 8080)].concat();
    let port_name = [int(1, 1), bytes(3, b"http")].concat();
    // A Probe holds its handler in field 1, inlined in JSON.
    let readiness = bytes(
        1,
        &bytes(2, &[bytes(1, b"/healthz"), bytes(2, &port_int)].concat()),
    );
    let liveness = bytes(1, &bytes(3, &bytes(1, &port_name)));
    let quantity = |q: &[u8]| bytes(1, q);
    let limits = [bytes(1, b"cpu"), bytes(2, &quantity(b"500m"))].concat();
    let resources = bytes(1, &limits);
    let container = [
        bytes(1, b"c"),
        bytes(2, b"busybox"),
        bytes(8, &resources),
        bytes(10, &liveness),
        bytes(11, &readiness),
    ]
    .concat();
    let packed = [varint(1), varint(2), varint(300)].concat();
    let sc = [bytes(4, &packed), int(4, 7)].concat();
    let spec = [bytes(2, &container), int(4, (-1i64) as u64), bytes(14, &sc)].concat();
    let raw = [bytes(1, &bytes(1, b"p")), bytes(2, &spec)].concat();
    let got = decode_v1("", "Pod", &raw).unwrap();
    let c = &got["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"], json!({"cpu": "500m"}));
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], json!(8080));
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["livenessProbe"]["tcpSocket"]["port"], json!("http"));
    assert_eq!(got["spec"]["terminationGracePeriodSeconds"], json!(-1));
    assert_eq!(
        got["spec"]["securityContext"]["supplementalGroups"],
        json!([1, 2, 300, 7])
    );
    // A Lease's MicroTime keeps its microseconds.
    let renew = [int(1, 1_700_000_000), int(2, 123_456_789)].concat();
    let raw = [
        bytes(1, &bytes(1, b"l")),
        bytes(2, &[bytes(1, b"me"), bytes(4, &renew)].concat()),
    ]
    .concat();
    let got = decode_v1("coordination.k8s.io", "Lease", &raw).unwrap();
    assert_eq!(got["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
    assert_eq!(got["spec"]["holderIdentity"], "me");
    // A claim's empty storageClassName means "no class" and is kept.
    let spec = [bytes(5, b"")].concat();
    let raw = [bytes(1, &bytes(1, b"c")), bytes(2, &spec)].concat();
    let got = decode_v1("", "PersistentVolumeClaim", &raw).unwrap();
    assert_eq!(got["spec"]["storageClassName"], "");
    // An Eviction sent to a core pod's subresource is read by its own group's table.
    let raw = [bytes(1, &bytes(1, b"p")), bytes(2, &int(1, 0))].concat();
    let got = decode("", "Pod", &envelope("policy/v1", "Eviction", &raw)).unwrap();
    assert_eq!(got["deleteOptions"]["gracePeriodSeconds"], json!(0));
}

#[test]
fn hostile_bodies_are_400() {
    let good = envelope("v1", "Secret", &bytes(1, &bytes(1, b"s")));
    // Every truncation of a good body.
    for cut in MAGIC.len()..good.len() {
        let e = decode("", "Secret", &good[..cut]);
        if let Err(e) = e {
            assert_eq!(e.code, 400, "cut at {cut}");
        }
    }
    assert_eq!(decode("", "Secret", b"{}").unwrap_err().code, 400);
    // A length far past the end.
    let mut huge = MAGIC.to_vec();
    huge.extend(key(2, 2));
    huge.extend(varint(u64::MAX >> 1));
    assert_eq!(decode("", "Secret", &huge).unwrap_err().code, 400);
    // An endless varint.
    let mut endless = MAGIC.to_vec();
    endless.extend([0xff; 20]);
    assert_eq!(decode("", "Secret", &endless).unwrap_err().code, 400);
    // Deep nesting: the tables do not recurse, so ten thousand levels are read no deeper
    // than the schema goes (a string at the bottom, or a refusal), never a stack overflow.
    for (g, k, n) in [
        ("", "Secret", 1),
        ("rbac.authorization.k8s.io", "ClusterRole", 3),
    ] {
        let mut deep = bytes(n, b"x");
        for _ in 0..10_000 {
            deep = bytes(n, &deep);
        }
        let body = [MAGIC, &bytes(2, &deep)[..]].concat();
        if let Err(e) = decode(g, k, &body) {
            assert_eq!(e.code, 400, "{k}");
        }
    }
}

/// Cases: 256 in every run; the fuzz run sets `VOLHEALTH_FUZZ_CASES=100000`.
fn cases() -> u32 {
    volhealth_testkit::fuzz_cases(256)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(cases()))]

    #[test]
    fn any_body_is_an_answer_not_a_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        for (g, k) in [
            ("", "Secret"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("", "Pod"),
            ("", "PersistentVolumeClaim"),
            ("", "PersistentVolume"),
            ("", "Node"),
            ("", "Event"),
            ("events.k8s.io", "Event"),
            ("storage.k8s.io", "CSINode"),
            ("storage.k8s.io", "CSIDriver"),
            ("storage.k8s.io", "StorageClass"),
            ("storage.k8s.io", "VolumeAttachment"),
            ("coordination.k8s.io", "Lease"),
            ("policy", "PodDisruptionBudget"),
        ] {
            let mut body = MAGIC.to_vec();
            body.extend(tail.iter().copied());
            if let Err(e) = decode(g, k, &body) {
                proptest::prop_assert!(e.code == 400 || e.code == 415);
            }
        }
    }

    /// A valid pod body with bytes overwritten, cut or inserted: an answer, never a panic.
    #[test]
    fn mutated_pod_bodies_are_an_answer_not_a_panic(
        edits in proptest::collection::vec((0usize..4096, proptest::num::u8::ANY, 0u8..3), 1..8)
    ) {
        let spec = [
            bytes(2, &[bytes(1, b"c"), bytes(2, b"busybox"), bytes(8, &bytes(1, &[bytes(1, b"cpu"), bytes(2, &bytes(1, b"1"))].concat()))].concat()),
            bytes(7, &[bytes(1, b"disk"), bytes(2, b"ssd")].concat()),
            int(4, 30),
        ]
        .concat();
        let raw = [bytes(1, &bytes(1, b"p")), bytes(2, &spec)].concat();
        let mut body = envelope("v1", "Pod", &raw);
        for (at, byte, op) in edits {
            let at = MAGIC.len() + at % (body.len() - MAGIC.len()).max(1);
            match op {
                0 => {
                    let i = at.min(body.len() - 1);
                    body[i] = byte;
                }
                1 => body.truncate(at),
                _ => body.insert(at.min(body.len()), byte),
            }
            if body.len() <= MAGIC.len() {
                break;
            }
        }
        if let Err(e) = decode("", "Pod", &body) {
            proptest::prop_assert!(e.code == 400 || e.code == 415, "{}", e.message);
        }
    }
}
