//! The redacting `Debug` generator on shapes csi.proto lacks (see
//! `tests/proto/redaction_fixture.proto`): secrets in oneofs, optional, bytes
//! and repeated secrets, nested types and keyword names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

#[allow(clippy::all, missing_docs)]
mod fixture {
    include!(concat!(
        env!("OUT_DIR"),
        "/fixture/volhealth.fixture.redaction.rs"
    ));
    include!(concat!(env!("OUT_DIR"), "/fixture/redacted_debug.rs"));
}

use fixture::credentials::{Kind, RpcInfo, Source, Type};
use fixture::{Credentials, Envelope};

const SECRET: &str = "s3cr3t-VALUE";

fn credentials(choice: Type) -> Credentials {
    Credentials {
        name: "visible-name".into(),
        password: SECRET.into(),
        tokens: vec![SECRET.into(), SECRET.into(), SECRET.into()],
        secrets: [("k1".to_string(), SECRET.to_string())].into(),
        kind: Kind::Static as i32,
        r#type: Some(choice),
        note: Some("visible-note".into()),
        pin: Some(SECRET.into()),
        blob: SECRET.as_bytes().to_vec(),
    }
}

fn assert_hidden(text: &str) {
    assert!(!text.contains(SECRET), "secret leaked: {text}");
    // Debug of bytes prints numbers; make sure those are not there either.
    let as_numbers = format!("{:?}", SECRET.as_bytes());
    assert!(
        !text.contains(&as_numbers[1..as_numbers.len() - 1]),
        "{text}"
    );
}

#[test]
fn every_kind_of_secret_field_is_hidden_and_named() {
    for choice in [
        Type::InlineKey(SECRET.into()),
        Type::Source(Source {
            uri: "visible-uri".into(),
            token: SECRET.into(),
        }),
        Type::RpcInfo(RpcInfo {
            r#type: "visible-type".into(),
        }),
    ] {
        let text = format!("{:?}", credentials(choice));
        assert_hidden(&text);
        for expected in [
            "name: \"visible-name\"",
            "password: <redacted>",
            "tokens: <redacted 3 items>",
            "secrets: <redacted 1 keys>",
            "kind: KIND_STATIC",
            "note: Some(\"visible-note\")",
            "pin: <redacted>",
            "blob: <redacted>",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in {text}");
        }
        assert!(
            text.contains("type: Some(InlineKey(<redacted>))")
                || text.contains(
                    "type: Some(Source(Source { uri: \"visible-uri\", token: <redacted> }))"
                )
                || text.contains("type: Some(RpcInfo(RpcInfo { type: \"visible-type\" }))"),
            "oneof not printed as expected: {text}"
        );
    }
}

#[test]
fn unknown_enum_numbers_print_as_numbers() {
    let mut c = credentials(Type::InlineKey(SECRET.into()));
    c.kind = 42;
    let text = format!("{c:#?}");
    assert!(text.contains("kind: 42"), "{text}");
    assert_hidden(&text);
}

#[test]
fn messages_holding_secret_bearing_ones_stay_redacted() {
    let env = Envelope {
        credentials: Some(credentials(Type::InlineKey(SECRET.into()))),
        trace_id: "visible-trace".into(),
    };
    let text = format!("{env:?}");
    assert_hidden(&text);
    assert!(
        text.contains("visible-trace") && text.contains("password: <redacted>"),
        "{text}"
    );
}
