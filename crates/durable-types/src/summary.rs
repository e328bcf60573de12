//! The one-line call summary and the arguments view of a tool call
//! (contract §7.3, the seed's `callSummary` and `argumentsView`).
//!
//! Both keep the arguments' own key order: the workspace enables
//! `serde_json`'s `preserve_order`, so an object keeps the order in which the
//! program built it. Each value is written as compact JSON.
//!
//! The seed only describes object arguments. For other shapes this module
//! decides:
//!
//! | `args` | [`arguments_view`] | [`call_summary`] |
//! |---|---|---|
//! | object `{"order":"5521","amount":40}` | `[("order", "\"5521\""), ("amount", "40")]` | `refund(order: "5521", amount: 40)` |
//! | array `["a", 1]` | positional keys: `[("0", "\"a\""), ("1", "1")]` | `f("a", 1)` (no keys) |
//! | `null` | `[]` (no arguments) | `f()` |
//! | a string, number or bool `7` | one pair named `value`: `[("value", "7")]` | `f(7)` (no key) |
//!
//! Neither function sanitizes or truncates: the ask and item rules clean the
//! text where it is sent (`tool.call` is a line of at most 512 bytes).

use serde_json::Value;

/// The key of the single pair that a scalar `args` gives in
/// [`arguments_view`].
const SCALAR_KEY: &str = "value";

/// The arguments of a tool call as `(key, value)` pairs, each value as
/// compact JSON, in the arguments' own order.
///
/// ```
/// let args = durable_sdk::json!({"order": "5521", "amount": 40});
/// assert_eq!(
///     durable_sdk::asks::arguments_view(&args),
///     vec![("order".to_owned(), "\"5521\"".to_owned()), ("amount".to_owned(), "40".to_owned())],
/// );
/// ```
///
/// An array gives positional keys `"0"`, `"1"`, …; `null` gives no pair; a
/// string, number or bool gives one pair named `value` (see the module docs).
pub fn arguments_view(args: &Value) -> Vec<(String, String)> {
    match args {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
        Value::Array(items) => {
            items.iter().enumerate().map(|(i, v)| (i.to_string(), v.to_string())).collect()
        }
        Value::Null => Vec::new(),
        scalar => vec![(SCALAR_KEY.to_owned(), scalar.to_string())],
    }
}

/// The call on one line: `name(key: value, …)`, each value as compact JSON,
/// in the arguments' own order.
///
/// ```
/// let args = durable_sdk::json!({"order": "5521", "amount": 40});
/// assert_eq!(durable_sdk::asks::call_summary("refund", &args), r#"refund(order: "5521", amount: 40)"#);
/// ```
///
/// Positional arguments (an array) and a lone scalar are written without
/// keys, as `name("a", 1)` and `name(7)`; `null` gives `name()`.
pub fn call_summary(name: &str, args: &Value) -> String {
    let inner = match args {
        Value::Object(_) => {
            arguments_view(args).into_iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
        }
        Value::Array(items) => items.iter().map(Value::to_string).collect::<Vec<_>>().join(", "),
        Value::Null => String::new(),
        scalar => scalar.to_string(),
    };
    format!("{name}({inner})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn call_summary_writes_name_and_key_value_pairs_as_json() {
        let args = json!({"order": "5521", "amount": 40});
        assert_eq!(call_summary("refund", &args), r#"refund(order: "5521", amount: 40)"#);
    }

    #[test]
    fn arguments_view_gives_key_and_json_value_pairs() {
        let args = json!({"order": "5521", "amount": 40});
        assert_eq!(arguments_view(&args), pairs(&[("order", "\"5521\""), ("amount", "40")]));
    }

    #[test]
    fn arguments_keep_the_programs_key_order() {
        // Not alphabetical: the order the program built the object in.
        let mut map = serde_json::Map::new();
        map.insert("zeta".into(), json!(1));
        map.insert("alpha".into(), json!(2));
        map.insert("mid".into(), json!({"y": 1, "x": 2}));
        let args = Value::Object(map);
        assert_eq!(
            arguments_view(&args),
            pairs(&[("zeta", "1"), ("alpha", "2"), ("mid", r#"{"y":1,"x":2}"#)])
        );
        assert_eq!(call_summary("f", &args), r#"f(zeta: 1, alpha: 2, mid: {"y":1,"x":2})"#);
    }

    #[test]
    fn argument_values_are_compact_json() {
        let args = json!({"list": [1, "two", null], "ok": true, "q": "say \"hi\"\n", "f": 1.5});
        assert_eq!(
            arguments_view(&args),
            pairs(
                &[("list", r#"[1,"two",null]"#), ("ok", "true"), ("q", r#""say \"hi\"\n""#), ("f", "1.5"),]
            )
        );
    }

    #[test]
    fn no_arguments_give_empty_parentheses() {
        assert_eq!(call_summary("ping", &json!({})), "ping()");
        assert!(arguments_view(&json!({})).is_empty());
        assert_eq!(call_summary("ping", &Value::Null), "ping()");
        assert!(arguments_view(&Value::Null).is_empty());
    }

    #[test]
    fn array_arguments_are_positional() {
        let args = json!(["a", 1, {"k": false}]);
        assert_eq!(arguments_view(&args), pairs(&[("0", "\"a\""), ("1", "1"), ("2", r#"{"k":false}"#)]));
        assert_eq!(call_summary("f", &args), r#"f("a", 1, {"k":false})"#);
        assert_eq!(call_summary("f", &json!([])), "f()");
        assert!(arguments_view(&json!([])).is_empty());
    }

    #[test]
    fn a_scalar_argument_is_one_pair_named_value() {
        assert_eq!(arguments_view(&json!(7)), pairs(&[("value", "7")]));
        assert_eq!(arguments_view(&json!("x")), pairs(&[("value", "\"x\"")]));
        assert_eq!(arguments_view(&json!(false)), pairs(&[("value", "false")]));
        assert_eq!(call_summary("f", &json!(7)), "f(7)");
        assert_eq!(call_summary("f", &json!("x")), r#"f("x")"#);
    }

    #[test]
    fn non_ascii_values_stay_utf8() {
        let args = json!({"name": "Zoë ✓"});
        assert_eq!(call_summary("greet", &args), r#"greet(name: "Zoë ✓")"#);
    }
}
