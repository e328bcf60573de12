//! ACP elicitation (`elicitation/create`) as cards. A form the agent asks
//! for is a `form` card with the wire's field kinds, its fields in the
//! order of their names (the protocol crate keeps the schema's properties
//! sorted); a field that maps to none of them refuses the whole form (the
//! agent hears `decline`, the pane says why). A URL the agent asks the user to open is a card that
//! shows the target's host and never opens it: the user opens it
//! elsewhere, or not, and says so.

use durable_types::{Answer, AskOption, AskSpec, FieldType, FormField, OptionStyle, SelectOption};
use serde_json::{Map, Value};

/// The most fields a form card holds (a card is read on a phone).
const FIELDS_MAX: usize = 16;

/// How a form field's answer goes back: under the agent's property name,
/// as the type the agent asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldBack {
    /// The card's field id.
    id: String,
    /// The agent's property name.
    property: String,
    kind: Back,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Back {
    Text,
    Integer,
    Number,
    Bool,
}

/// The card of a form elicitation: its spec and how each answer goes back;
/// `Err` names what does not map.
pub(crate) fn form_card(
    call: &str,
    message: &str,
    schema: &Value,
) -> Result<(AskSpec, Vec<FieldBack>), String> {
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    if properties.is_empty() {
        return Err("the form has no fields".into());
    }
    if properties.len() > FIELDS_MAX {
        return Err(format!(
            "the form has {} fields, more than a card holds ({FIELDS_MAX})",
            properties.len()
        ));
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = Vec::new();
    let mut backs: Vec<FieldBack> = Vec::new();
    for (n, (property, spec)) in properties.iter().enumerate() {
        // A property name the ID rule refuses gets an id of its own, one no
        // other field has.
        let mut id = property.clone();
        let mut k = n;
        while durable_types::check_id(&id).is_err()
            || backs.iter().any(|b| b.id == id)
            || (id != *property && properties.contains_key(&id))
        {
            id = format!("field-{k}");
            k += 1;
        }
        let label =
            spec.get("title").and_then(Value::as_str).filter(|t| !t.trim().is_empty()).unwrap_or(property);
        let (field_type, kind, options) = match spec.get("type").and_then(Value::as_str) {
            Some("string") => match choices(spec) {
                Some(options) => (FieldType::Select, Back::Text, Some(options)),
                None => (FieldType::Text, Back::Text, None),
            },
            Some("integer") => (FieldType::Number, Back::Integer, None),
            Some("number") => (FieldType::Number, Back::Number, None),
            Some("boolean") => (FieldType::Bool, Back::Bool, None),
            other => {
                return Err(format!(
                    "the field {property:?} is of type {}, which no card field takes",
                    other.map_or_else(|| "none".to_owned(), |t| format!("{t:?}"))
                ));
            }
        };
        let mut field = FormField::new(id.clone(), label, field_type);
        if required.contains(&property.as_str()) {
            field = field.required();
        }
        if let Some(options) = options {
            field.options = Some(options);
        }
        fields.push(field);
        backs.push(FieldBack { id, property: property.clone(), kind });
    }
    let title = if message.trim().is_empty() { "The agent asks for a few answers" } else { message };
    Ok((AskSpec::form(call, title, fields), backs))
}

/// A string property's choices (`enum`, or `oneOf` of `const` with a
/// `title`), as select options; `None` for free text, or choices whose
/// ids the wire cannot carry.
fn choices(spec: &Value) -> Option<Vec<SelectOption>> {
    let listed: Vec<(String, String)> = if let Some(values) = spec.get("enum").and_then(Value::as_array) {
        values.iter().filter_map(Value::as_str).map(|v| (v.to_owned(), v.to_owned())).collect()
    } else {
        let one_of = spec.get("oneOf").and_then(Value::as_array)?;
        one_of
            .iter()
            .filter_map(|o| {
                let value = o.get("const").and_then(Value::as_str)?;
                let title = o.get("title").and_then(Value::as_str).unwrap_or(value);
                Some((value.to_owned(), title.to_owned()))
            })
            .collect()
    };
    if listed.is_empty() || listed.iter().any(|(id, _)| durable_types::check_id(id).is_err()) {
        return None;
    }
    Some(listed.into_iter().map(|(id, label)| SelectOption { id, label }).collect())
}

/// The form's answer as the agent's `content`, each value of the type its
/// property asked for.
pub(crate) fn content_of(answer: &Answer, backs: &[FieldBack]) -> Map<String, Value> {
    let Answer::Values { values } = answer else { return Map::new() };
    let mut content = Map::new();
    for back in backs {
        let Some(value) = values.get(&back.id) else { continue };
        let value = match (back.kind, value) {
            (Back::Integer, Value::Number(n)) => {
                match n.as_i64().or_else(|| n.as_f64().map(|f| f.round() as i64)) {
                    Some(i) => Value::from(i),
                    None => continue,
                }
            }
            (_, v) => v.clone(),
        };
        content.insert(back.property.clone(), value);
    }
    content
}

/// The card of a URL elicitation: it shows the host first and the whole
/// address, and opens nothing; `Err` for an address that is not `https://`
/// or `http://` with a host.
pub(crate) fn url_card(call: &str, message: &str, url: &str) -> Result<AskSpec, String> {
    let host = host_of(url).ok_or_else(|| format!("the address {url:?} is not http(s) with a host"))?;
    let reason = if message.trim().is_empty() {
        format!("Address: {url}. Nothing opens by itself: open it yourself if you trust {host}.")
    } else {
        format!("{message}\n\nAddress: {url}. Nothing opens by itself: open it yourself if you trust {host}.")
    };
    Ok(AskSpec::choice(
        call,
        format!("The agent asks you to open a page on {host}"),
        [
            AskOption::new("done", "I opened it and did it").style(OptionStyle::Primary),
            AskOption::new("decline", "Decline").style(OptionStyle::Danger),
        ],
    )
    .reason(reason))
}

/// The host of an `https://` or `http://` address (no user, no port);
/// `None` for an address a browser could read another way: one with a
/// backslash (a browser takes it for `/`, so `https://evil\@good/` opens
/// `evil`), white space or a control character.
fn host_of(url: &str) -> Option<String> {
    if url.chars().any(|c| c == '\\' || c.is_whitespace() || c.is_control()) {
        return None;
    }
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host =
        if let Some(v6) = host.strip_prefix('[') { v6.split(']').next()? } else { host.split(':').next()? };
    (!host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c)))
        .then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_form_maps_to_the_wires_field_kinds_and_its_answer_goes_back_typed() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Your name"},
            "size": {"type": "string", "enum": ["s", "m"]},
            "tone": {"type": "string", "oneOf": [{"const": "warm", "title": "Warm"}, {"const": "cool"}]},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"}
        }, "required": ["name", "count"]});
        let (spec, backs) = form_card("elicit-1", "Details, please", &schema).unwrap();
        assert_eq!(spec.title, "Details, please");
        let durable_types::AskKind::Form { fields } = &spec.kind else { panic!("{spec:?}") };
        let shown: Vec<(&str, &str, FieldType, bool)> =
            fields.iter().map(|f| (f.id.as_str(), f.label.as_str(), f.field_type, f.required)).collect();
        assert_eq!(
            shown,
            [
                ("name", "Your name", FieldType::Text, true),
                ("size", "size", FieldType::Select, false),
                ("tone", "tone", FieldType::Select, false),
                ("count", "count", FieldType::Number, true),
                ("ratio", "ratio", FieldType::Number, false),
                ("ok", "ok", FieldType::Bool, false),
            ]
        );
        let tone = fields[2].options.as_ref().unwrap();
        assert_eq!(
            (tone[0].id.as_str(), tone[0].label.as_str(), tone[1].label.as_str()),
            ("warm", "Warm", "cool")
        );
        let answer = Answer::Values {
            values: serde_json::from_value(
                json!({"name": "Ana", "size": "m", "tone": "warm", "count": 2.0, "ratio": 0.5, "ok": true}),
            )
            .unwrap(),
        };
        let content = content_of(&answer, &backs);
        assert_eq!(
            Value::Object(content),
            json!({"name": "Ana", "size": "m", "tone": "warm", "count": 2, "ratio": 0.5, "ok": true})
        );
    }

    #[test]
    fn a_property_name_the_id_rule_refuses_gets_an_id_no_other_field_has() {
        let schema = json!({"properties": {"a b": {"type": "string"}, "field-0": {"type": "string"}}});
        let (spec, backs) = form_card("e", "m", &schema).unwrap();
        let durable_types::AskKind::Form { fields } = &spec.kind else { panic!("{spec:?}") };
        let ids: Vec<&str> = fields.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["field-1", "field-0"]);
        let answer = Answer::Values {
            values: serde_json::from_value(json!({"field-1": "spaced", "field-0": "plain"})).unwrap(),
        };
        assert_eq!(Value::Object(content_of(&answer, &backs)), json!({"a b": "spaced", "field-0": "plain"}));
    }

    #[test]
    fn a_field_no_card_takes_refuses_the_form_naming_it() {
        let multi = json!({"properties": {"tags": {"type": "array", "items": {"type": "string"}}}});
        let err = form_card("e", "m", &multi).unwrap_err();
        assert!(err.contains("\"tags\"") && err.contains("\"array\""), "{err}");
        assert!(form_card("e", "m", &json!({"properties": {}})).is_err());
    }

    #[test]
    fn a_url_card_shows_its_host_and_refuses_what_is_not_http() {
        let spec = url_card("e", "Sign in to continue", "https://User@Login.Example.com:8443/a?b").unwrap();
        assert_eq!(spec.title, "The agent asks you to open a page on login.example.com");
        let reason = spec.reason.unwrap_or_default();
        assert!(
            reason.starts_with("Sign in to continue")
                && reason.contains("https://User@Login.Example.com:8443/a?b"),
            "{reason}"
        );
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https:///x",
            "https://a b/",
            "https://evil.example\\@login.example.com/",
            "https://login.example.com\n.evil/",
        ] {
            assert!(url_card("e", "m", bad).is_err(), "{bad}");
        }
    }
}
