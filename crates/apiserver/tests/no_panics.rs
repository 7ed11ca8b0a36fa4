//! Property tests: the parsers and patchers answer every input with a value or an API error,
//! never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use proptest::prelude::*;
use serde_json::{Map, Value};
use volhealth_apiserver::patch::{self, PatchType};
use volhealth_apiserver::registry::{self, RESOURCES};
use volhealth_apiserver::selectors::{FieldSelector, LabelSelector};
use volhealth_apiserver::{request, validation};

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("metadata".to_string()),
        Just("status".to_string()),
        Just("spec".to_string()),
        Just("name".to_string()),
        Just("$patch".to_string()),
        Just("$retainKeys".to_string()),
        Just("$setElementOrder/containers".to_string()),
        Just("$deleteFromPrimitiveList/finalizers".to_string()),
        Just("containers".to_string()),
        Just("volumeHealth".to_string()),
        Just("healthConditions".to_string()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just("delete"), Just("replace"), Just("merge"), Just("x")]
            .prop_map(|s| Value::String(s.into())),
        "[ -~]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// Cases per property: 256 in every run; the fuzz run sets `VOLHEALTH_FUZZ_CASES=100000`
/// (see docs/benchmarks.md).
fn cases() -> u32 {
    volhealth_testkit::fuzz_cases(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn selectors_never_panic(s in "[ -~]{0,40}") {
        let _ = LabelSelector::parse(&s);
        let pods = registry::find("", "v1", "pods").unwrap();
        let _ = FieldSelector::parse(&s, pods);
        let _ = request::parse_query(Some(&s));
        let _ = request::route(&s);
        let _ = request::format(&s, Some(&s));
    }

    #[test]
    fn patches_and_validation_never_panic(orig in json_value(), p in json_value(), which in 0usize..12) {
        let def = &RESOURCES[which % RESOURCES.len()];
        let body = serde_json::to_vec(&p).unwrap();
        for pt in [PatchType::Json, PatchType::Merge, PatchType::Strategic, PatchType::Apply] {
            if let Ok(out) = patch::apply(def, pt, &orig, &body) {
                let _ = validation::validate(def, &out);
            }
        }
        let _ = patch::apply::apply(def, &orig, &p, "m", "");
    }
}
