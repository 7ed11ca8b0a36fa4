use super::*;

#[test]
fn the_shipped_rules_parse_and_map_the_drivers_public_messages() {
    let rules = Rules::shipped().unwrap();
    assert!(rules.len() >= 10);
    let m = rules.map(
        "hostpath.csi.k8s.io",
        "The source path of the volume doesn't exist",
    );
    assert_eq!(
        (m.status, m.reason.as_str()),
        (Status::Inaccessible, "VolumeSourceMissing")
    );
    let a = rules.map(
        "csi-vxflexos.dellemc.com",
        "Volume is not found by controller at 2024-03-01 10:15:42",
    );
    let b = rules.map(
        "csi-vxflexos.dellemc.com",
        "Volume is not found by controller at 2024-03-01 10:16:12.123456789 +0000 UTC",
    );
    assert_eq!(a, b, "the timestamp does not make a new message");
    assert_eq!(a.message, "Volume is not found by controller at");
    assert_eq!(
        (a.status, a.reason.as_str()),
        (Status::Inaccessible, "VolumeNotFound")
    );
    let ceph = rules.map(
        "rbd.csi.ceph.com",
        "health-check has not responded for 42 seconds",
    );
    assert_eq!(ceph.message, "health-check has not responded for N seconds");
    let linstor = rules.map(
        "linstor.csi.linbit.com",
        "resource pvc-1 is not healthy on nodes: n3, n1, n2",
    );
    assert_eq!(
        linstor.message,
        "resource pvc-1 is not healthy on nodes: n1, n2, n3"
    );
    // The LINSTOR rule is scoped: another driver's list is left alone.
    let other = rules.map("other.example.com", "down on n3, n1");
    assert_eq!(
        (other.reason.as_str(), other.message.as_str()),
        (DEFAULT_REASON, "down on n3, n1")
    );
}

#[test]
fn an_unmatched_message_is_degraded_with_the_drivers_words() {
    let m = Rules::default().map("x", "something odd");
    assert_eq!(
        m,
        Mapped {
            status: Status::Degraded,
            reason: DEFAULT_REASON.into(),
            message: "something odd".into()
        }
    );
}

#[test]
fn a_users_rules_come_before_the_shipped_ones() {
    let mine = Rules::parse(
        "rules:\n- match: \"The volume isn't mounted*\"\n  status: Degraded\n  reason: MyReason\n",
    )
    .unwrap();
    let rules = mine.then(Rules::shipped().unwrap());
    assert_eq!(
        rules.map("d", "The volume isn't mounted").reason,
        "MyReason"
    );
}

#[test]
fn bad_rules_files_are_refused_with_the_rule_named() {
    for (yaml, want) in [
        ("rules: [", "not valid"),
        (
            "rules:\n- match: x\n  status: Broken\n  reason: R\n",
            "not valid",
        ),
        (
            "rules:\n- match: x\n  status: Degraded\n  reason: notCamel\n",
            "rule 1",
        ),
        (
            "rules:\n- match: \"\"\n  status: Degraded\n  reason: R\n",
            "rule 1",
        ),
        (
            "rules:\n- match: x\n  status: Degraded\n  reason: R\n  extra: 1\n",
            "not valid",
        ),
        (
            "rules:\n- match: x\n  status: Degraded\n  reason: R\n  normalize: [shout]\n",
            "not valid",
        ),
    ] {
        let err = Rules::parse(yaml).unwrap_err().to_string();
        assert!(err.contains(want), "{yaml:?}: {err}");
    }
}

#[test]
fn timestamps_of_the_common_shapes_are_stripped() {
    for (input, want) in [
        ("at 2006-01-02 15:04:05", "at"),
        ("at 2006-01-02T15:04:05Z, retrying", "at, retrying"),
        ("at 2006-01-02T15:04:05.123+02:00 now", "at now"),
        ("at 2006-01-02 15:04:05.999999999 -0700 MST.", "at."),
        ("on 2006-01-02", "on"),
        ("id vol2006-01-02 kept", "id vol2006-01-02 kept"),
        ("no time here", "no time here"),
        ("é 2006-01-02 ü", "é ü"),
    ] {
        assert_eq!(strip_timestamps(input), want, "{input:?}");
    }
}

#[test]
fn lists_are_sorted_and_prose_around_them_kept() {
    assert_eq!(sort_lists("nodes: c, a, b."), "nodes: a, b, c.");
    assert_eq!(sort_lists("on b, a and then z, y"), "on a, b and then y, z");
    assert_eq!(sort_lists("nothing to sort"), "nothing to sort");
    assert_eq!(sort_lists("a,b, c"), "a,b, c");
}

proptest::proptest! {
    #[test]
    fn normalising_never_panics_and_is_stable(s in ".{0,200}") {
        let once = strip_timestamps(&s);
        proptest::prop_assert_eq!(strip_timestamps(&once), once.clone());
        let sorted = sort_lists(&s);
        proptest::prop_assert_eq!(sort_lists(&sorted), sorted.clone());
        let _ = replace_numbers(&s);
        let _ = glob("*a*b?*", &s);
    }
}
