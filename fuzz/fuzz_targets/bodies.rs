//! `bodies`: any bytes into every request body parser of `durable-types` —
//! the write bodies (send, steer, stop and actions, rename, close, reopen,
//! starters), the answer request and `POST /hello` — and a parsed answer
//! into `AnswerBody::fit` against an ask of each kind.
//!
//! Asserts: no panic; what parses keeps the rules it promises (request id
//! by the ID rule, phone text within 64 KiB, a target id by its target's
//! rule, a hash of 64 lowercase hex); the typed body is the `WriteBody` of
//! its route; written back as JSON it parses to the same value, and an
//! unknown field added changes nothing (`docs/wire.md` §2); an answer that
//! fits its ask keeps the kind's rules and survives its own JSON.
#![no_main]

use std::sync::OnceLock;

use durable_types::{
    AnswerRequest, AskKind, AskOption, AskSpec, CloseBody, FieldType, FormField, HelloRequest, Id,
    PHONE_TEXT_MAX, PlainBody, RenameBody, ReopenBody, SendBody, StarterBody, SteerBody, Target, Timestamp,
    WriteBody, check_id, is_hash,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

fuzz_target!(|data: &[u8]| {
    send(data);
    steer(data);
    plain(data);
    rename(data);
    close(data);
    reopen(data);
    starter(data);
    answer(data);
    hello(data);
});

/// Parses `obj` written as JSON with `parse`, and again with an unknown
/// field added: both must give `want`.
fn again<T: PartialEq + std::fmt::Debug>(
    obj: Map<String, Value>,
    want: &T,
    parse: fn(&[u8]) -> Result<T, String>,
) {
    let bytes = serde_json::to_vec(&obj).expect("a map is JSON");
    assert_eq!(parse(&bytes).as_ref(), Ok(want), "written back: {obj:?}");
    let mut more = obj;
    more.insert("zzUnknownField".into(), json!({"x": [1, null]}));
    let bytes = serde_json::to_vec(&more).expect("a map is JSON");
    assert_eq!(parse(&bytes).as_ref(), Ok(want), "an unknown field changed the parse: {more:?}");
}

fn fields(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

fn request_id(id: &Id) -> (&'static str, Value) {
    assert!(check_id(id.as_str()).is_ok(), "requestId {id:?} breaks the ID rule");
    ("requestId", json!(id.as_str()))
}

fn error_says_something<T>(r: &Result<T, String>) {
    if let Err(e) = r {
        assert!(!e.is_empty(), "an empty error sentence");
    }
}

fn send(data: &[u8]) {
    let r = SendBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_send(data));
    let Ok(b) = r else { return };
    assert!(b.text.len() <= PHONE_TEXT_MAX);
    let mut o = fields(&[request_id(&b.request_id), ("text", json!(b.text))]);
    match &b.turn_id {
        None => {}
        Some(t) => {
            o.insert("turnId".into(), t.as_ref().map_or(Value::Null, |t| json!(t)));
        }
    }
    again(o, &b, SendBody::parse);
}

fn steer(data: &[u8]) {
    let r = SteerBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_steer(data));
    let Ok(b) = r else { return };
    assert!(b.text.len() <= PHONE_TEXT_MAX);
    again(fields(&[request_id(&b.request_id), ("text", json!(b.text))]), &b, SteerBody::parse);
}

fn plain(data: &[u8]) {
    let r = PlainBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_plain(data));
    let Ok(b) = r else { return };
    again(fields(&[request_id(&b.request_id)]), &b, PlainBody::parse);
}

fn target_word(t: Target) -> &'static str {
    match t {
        Target::Workspace => "workspace",
        Target::Tab => "tab",
        _ => "pane",
    }
}

fn rename(data: &[u8]) {
    let r = RenameBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_rename(data));
    let Ok(b) = r else { return };
    assert!(b.target.check_id(&b.id).is_ok(), "a rename id breaks its target's rule: {b:?}");
    let o = fields(&[
        request_id(&b.request_id),
        ("target", json!(target_word(b.target))),
        ("id", json!(b.id)),
        ("title", json!(b.title)),
    ]);
    again(o, &b, RenameBody::parse);
}

fn close(data: &[u8]) {
    let r = CloseBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_close(data));
    let Ok(b) = r else { return };
    assert!(b.target.check_id(&b.id).is_ok(), "a close id breaks its target's rule: {b:?}");
    let o =
        fields(&[request_id(&b.request_id), ("target", json!(target_word(b.target))), ("id", json!(b.id))]);
    again(o, &b, CloseBody::parse);
}

fn reopen(data: &[u8]) {
    let r = ReopenBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_reopen(data));
    let Ok(b) = r else { return };
    assert!(check_id(b.id.as_str()).is_ok());
    again(fields(&[request_id(&b.request_id), ("id", json!(b.id.as_str()))]), &b, ReopenBody::parse);
}

fn starter(data: &[u8]) {
    let r = StarterBody::parse(data);
    error_says_something(&r);
    assert_eq!(r.clone().map(WriteBody::from), WriteBody::parse_starter(data));
    let Ok(b) = r else { return };
    let mut o = fields(&[request_id(&b.request_id)]);
    if let Some(t) = &b.text {
        assert!(t.len() <= PHONE_TEXT_MAX);
        o.insert("text".into(), json!(t));
    }
    again(o, &b, StarterBody::parse);
}

/// One ask of each kind, built once.
fn kinds() -> &'static [AskKind] {
    static KINDS: OnceLock<Vec<AskKind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let pane = Id::new("p").expect("an id");
        let opts = || ["a", "b", "c"].map(|o| AskOption::new(o, o.to_uppercase()));
        let specs = [
            AskSpec::choice("c1", "Pick one", opts()),
            AskSpec::multi("c2", "Pick some", opts()).picks(1, 2),
            AskSpec::multi("c3", "Pick any", opts()),
            AskSpec::text("c4", "Say").text_field(None, Some(true), Some(16)),
            AskSpec::text("c5", "Say more"),
            AskSpec::form(
                "c6",
                "Fill",
                [
                    FormField::new("a", "A", FieldType::Text).required(),
                    FormField::new("b", "B", FieldType::Number),
                    FormField::new("c", "C", FieldType::Bool),
                    FormField::new("d", "D", FieldType::Select).options([("x", "X"), ("y", "Y")]),
                ],
            ),
        ];
        specs.into_iter().map(|s| s.build(&pane, Timestamp::EPOCH, true).expect("a valid ask").kind).collect()
    })
}

fn answer(data: &[u8]) {
    let r = AnswerRequest::parse(data);
    error_says_something(&r);
    let Ok(a) = r else { return };
    if let Some(h) = &a.hash {
        assert!(is_hash(h), "a parsed hash is 64 lowercase hex: {h:?}");
    }
    // Written back as JSON, it parses the same.
    let mut answer = Map::new();
    if let Some(ids) = &a.answer.option_ids {
        answer.insert("optionIds".into(), json!(ids));
    }
    if let Some(t) = &a.answer.text {
        answer.insert("text".into(), json!(t));
    }
    if let Some(v) = &a.answer.values {
        answer.insert("values".into(), Value::Object(v.clone()));
    }
    let mut o = fields(&[request_id(&a.request_id), ("answer", Value::Object(answer))]);
    if let Some(h) = &a.hash {
        // Either case is read the same (docs/wire.md, "Decisions").
        o.insert("hash".into(), json!(h.to_ascii_uppercase()));
    }
    if a.confirm_always {
        o.insert("confirmAlways".into(), json!(true));
    }
    again(o, &a, AnswerRequest::parse);
    for kind in kinds() {
        fit(&a, kind);
    }
}

fn fit(a: &AnswerRequest, kind: &AskKind) {
    let Ok(answer) = a.answer.fit(kind) else { return };
    match kind {
        AskKind::Choice { options } => {
            let ids = answer.option_ids();
            assert_eq!(ids.len(), 1);
            assert!(options.iter().any(|o| o.id == ids[0]));
        }
        AskKind::Multi { options, min, max } => {
            let ids = answer.option_ids();
            let (lo, hi) = (min.unwrap_or(1) as usize, max.map_or(options.len(), |m| m as usize));
            assert!((lo..=hi).contains(&ids.len()), "{} picks of {lo} to {hi}", ids.len());
            assert!(ids.iter().all(|id| options.iter().any(|o| &o.id == id)));
            let mut uniq = ids.to_vec();
            uniq.sort();
            uniq.dedup();
            assert_eq!(uniq.len(), ids.len(), "an option picked twice");
        }
        AskKind::Text { max_bytes, .. } => {
            let text = answer.text().expect("a text answer");
            assert!(text.len() <= max_bytes.map_or(64 * 1024, |m| m as usize));
        }
        AskKind::Form { fields } => {
            let values = answer.values().expect("a form answer");
            assert!(values.keys().all(|k| fields.iter().any(|f| &f.id == k)));
            for f in fields.iter().filter(|f| f.required) {
                assert!(values.get(&f.id).is_some_and(|v| !v.is_null()), "required {} missing", f.id);
            }
        }
        _ => {}
    }
    // The answer survives its own wire object.
    let back: durable_types::Answer =
        serde_json::from_value(answer.to_json()).expect("an answer reads back from its JSON");
    assert_eq!(back, answer);
}

fn hello(data: &[u8]) {
    let Ok(h) = serde_json::from_slice::<HelloRequest>(data) else { return };
    let bytes = serde_json::to_vec(&h).expect("a hello request is JSON");
    let back: HelloRequest = serde_json::from_slice(&bytes).expect("a hello request reads back");
    assert_eq!(back, h);
}
