//! Answers to cards (docs/wire.md §7): from a line (`answer <ask> …`) or
//! from keys on a card (a [`Draft`]), into the body the agent takes.

use serde_json::{Map, Value, json};

use super::model::{Ask, Field, FieldType, Kind, Opt};

/// An answer ready to send.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    /// `{"optionIds": …}`, `{"text": …}` or `{"values": …}`.
    pub(crate) body: Value,
    /// The label of an allow-always option it picks: it needs the second
    /// confirmation (`confirmAlways`).
    pub(crate) always: Option<String>,
}

fn find_option<'a>(options: &'a [Opt], word: &str) -> Result<&'a Opt, String> {
    let word = word.trim();
    options
        .iter()
        .find(|o| o.id == word)
        .or_else(|| options.iter().find(|o| o.label.eq_ignore_ascii_case(word)))
        .or_else(|| word.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|n| options.get(n)))
        .ok_or_else(|| {
            let ids: Vec<&str> = options.iter().map(|o| o.id.as_str()).collect();
            format!("no option {word:?}: one of {}", ids.join(", "))
        })
}

/// Words split on white space, a double-quoted part kept whole
/// (`name="Ana Lopez" qty=2`).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

fn field_value(field: &Field, text: &str) -> Result<Value, String> {
    let label = &field.label;
    match &field.ty {
        FieldType::Text | FieldType::Other(_) => Ok(Value::String(text.to_owned())),
        FieldType::Number => {
            let text = text.trim();
            if let Ok(n) = text.parse::<i64>() {
                return Ok(json!(n));
            }
            text.parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{label}: {text:?} is not a number"))
        }
        FieldType::Bool => match text.trim().to_ascii_lowercase().as_str() {
            "yes" | "y" | "true" | "on" | "1" => Ok(Value::Bool(true)),
            "no" | "n" | "false" | "off" | "0" => Ok(Value::Bool(false)),
            other => Err(format!("{label}: {other:?} is neither yes nor no")),
        },
        FieldType::Select(options) => Ok(Value::String(find_option(options, text)?.id.clone())),
    }
}

/// An answer written on a line after the ask: an option (id, label or
/// number) for a choice, several for a multi (commas or spaces), the text
/// itself for a text ask, `field=value …` for a form.
pub(crate) fn parse(ask: &Ask, text: &str) -> Result<Answer, String> {
    match &ask.kind {
        Kind::Choice(options) => {
            if text.trim().is_empty() {
                return Err("answer with one option".into());
            }
            let o = find_option(options, text)?;
            Ok(Answer { body: json!({"optionIds": [o.id]}), always: o.always.then(|| o.label.clone()) })
        }
        Kind::Multi { options, .. } => {
            let mut ids: Vec<String> = Vec::new();
            for word in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
                let id = find_option(options, word)?.id.clone();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            Ok(Answer { body: json!({"optionIds": ids}), always: None })
        }
        Kind::Text { .. } => Ok(Answer { body: json!({"text": text}), always: None }),
        Kind::Form(fields) => {
            let mut values = Map::new();
            for word in words(text) {
                let (key, value) =
                    word.split_once('=').ok_or_else(|| format!("{word:?}: write field=value"))?;
                let field = fields
                    .iter()
                    .find(|f| f.id == key)
                    .or_else(|| fields.iter().find(|f| f.label.eq_ignore_ascii_case(key)))
                    .ok_or_else(|| {
                        let ids: Vec<&str> = fields.iter().map(|f| f.id.as_str()).collect();
                        format!("no field {key:?}: one of {}", ids.join(", "))
                    })?;
                values.insert(field.id.clone(), field_value(field, value)?);
            }
            Ok(Answer { body: json!({"values": values}), always: None })
        }
        Kind::Other(kind) => Err(format!("this phone cannot answer an ask of kind {kind:?}")),
    }
}

/// A card being answered with keys.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Draft {
    pub(crate) ask: String,
    /// The option or field under the cursor.
    pub(crate) cursor: usize,
    /// Multi: the options picked.
    pub(crate) picked: Vec<bool>,
    /// Text: what was typed.
    pub(crate) text: String,
    /// Form: each field's value as typed (`yes`/`no` for a bool, the
    /// option id for a select; empty when not given).
    pub(crate) fields: Vec<String>,
    /// An allow-always pick waiting for its second Enter.
    pub(crate) confirming: bool,
}

impl Draft {
    pub(crate) fn new(ask: &Ask) -> Draft {
        let (picked, fields) = match &ask.kind {
            Kind::Multi { options, .. } => (vec![false; options.len()], Vec::new()),
            Kind::Form(fields) => (Vec::new(), vec![String::new(); fields.len()]),
            _ => (Vec::new(), Vec::new()),
        };
        Draft { ask: ask.id.clone(), cursor: 0, picked, text: String::new(), fields, confirming: false }
    }

    fn rows(ask: &Ask) -> usize {
        match &ask.kind {
            Kind::Choice(o) | Kind::Multi { options: o, .. } => o.len(),
            Kind::Form(f) => f.len(),
            _ => 1,
        }
    }

    pub(crate) fn up(&mut self, _ask: &Ask) {
        self.confirming = false;
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub(crate) fn down(&mut self, ask: &Ask) {
        self.confirming = false;
        if self.cursor + 1 < Draft::rows(ask) {
            self.cursor += 1;
        }
    }

    /// The form field under the cursor.
    fn field<'a>(&self, ask: &'a Ask) -> Option<&'a Field> {
        match &ask.kind {
            Kind::Form(fields) => fields.get(self.cursor),
            _ => None,
        }
    }

    /// Whether typed characters go into the card (a text ask, or a form's
    /// text or number field under the cursor).
    pub(crate) fn takes_text(&self, ask: &Ask) -> bool {
        match &ask.kind {
            Kind::Text { .. } => true,
            Kind::Form(_) => {
                matches!(
                    self.field(ask).map(|f| &f.ty),
                    Some(FieldType::Text | FieldType::Number | FieldType::Other(_))
                )
            }
            _ => false,
        }
    }

    pub(crate) fn type_char(&mut self, ask: &Ask, c: char) {
        match &ask.kind {
            Kind::Text { .. } => self.text.push(c),
            Kind::Form(_) if self.takes_text(ask) => {
                if let Some(v) = self.fields.get_mut(self.cursor) {
                    v.push(c);
                }
            }
            _ => {}
        }
    }

    pub(crate) fn backspace(&mut self, ask: &Ask) {
        match &ask.kind {
            Kind::Text { .. } => {
                self.text.pop();
            }
            Kind::Form(_) => {
                let text = self.takes_text(ask);
                if let Some(v) = self.fields.get_mut(self.cursor) {
                    if text {
                        v.pop();
                    } else {
                        v.clear();
                    }
                }
            }
            _ => {}
        }
    }

    /// Space: picks or unpicks a multi option, flips a yes/no field, moves
    /// a select to its next option.
    pub(crate) fn toggle(&mut self, ask: &Ask) {
        match &ask.kind {
            Kind::Multi { .. } => {
                if let Some(p) = self.picked.get_mut(self.cursor) {
                    *p = !*p;
                }
            }
            Kind::Form(_) => self.cycle(ask, 1),
            _ => {}
        }
    }

    /// Left and right: a select's previous or next option, a yes/no flipped.
    pub(crate) fn cycle(&mut self, ask: &Ask, step: isize) {
        let Some(field) = self.field(ask) else { return };
        let Some(value) = self.fields.get_mut(self.cursor) else { return };
        match &field.ty {
            FieldType::Bool => *value = if value == "yes" { "no".into() } else { "yes".into() },
            FieldType::Select(options) if !options.is_empty() => {
                let n = options.len() as isize;
                let at = options
                    .iter()
                    .position(|o| o.id == *value)
                    .map_or(if step > 0 { -1 } else { n }, |i| i as isize);
                let next = (at + step).rem_euclid(n) as usize;
                *value = options[next].id.clone();
            }
            _ => {}
        }
    }

    /// The answer the card holds.
    pub(crate) fn answer(&self, ask: &Ask) -> Result<Answer, String> {
        match &ask.kind {
            Kind::Choice(options) => {
                let o = options.get(self.cursor).ok_or("no option under the cursor")?;
                Ok(Answer { body: json!({"optionIds": [o.id]}), always: o.always.then(|| o.label.clone()) })
            }
            Kind::Multi { options, .. } => {
                let ids: Vec<&str> = options
                    .iter()
                    .zip(&self.picked)
                    .filter(|(_, p)| **p)
                    .map(|(o, _)| o.id.as_str())
                    .collect();
                Ok(Answer { body: json!({"optionIds": ids}), always: None })
            }
            Kind::Text { .. } => Ok(Answer { body: json!({"text": self.text}), always: None }),
            Kind::Form(fields) => {
                let mut values = Map::new();
                for (field, text) in fields.iter().zip(&self.fields) {
                    if !text.is_empty() {
                        values.insert(field.id.clone(), field_value(field, text)?);
                    }
                }
                Ok(Answer { body: json!({"values": values}), always: None })
            }
            Kind::Other(kind) => Err(format!("this phone cannot answer an ask of kind {kind:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(v: Value) -> Ask {
        let mut base = json!({"id": "a1", "pane": "p", "title": "t", "hash": "h"});
        for (k, val) in v.as_object().unwrap() {
            base[k] = val.clone();
        }
        Ask::parse(&base, "ask").unwrap()
    }

    fn approve() -> Ask {
        ask(json!({"kind": "choice", "options": [{"id": "allow", "label": "Allow"},
            {"id": "allow-always", "label": "Allow always", "always": true}, {"id": "deny", "label": "Deny"}]}))
    }

    fn form() -> Ask {
        ask(json!({"kind": "form", "fields": [
            {"id": "name", "label": "Name", "type": "text", "required": true},
            {"id": "qty", "label": "Quantity", "type": "number"},
            {"id": "gift", "label": "Gift wrap", "type": "bool"},
            {"id": "size", "label": "Size", "type": "select",
             "options": [{"id": "s", "label": "Small"}, {"id": "m", "label": "Medium"}, {"id": "l", "label": "Large"}]}]}))
    }

    #[test]
    fn line_answers_by_kind() {
        let a = approve();
        assert_eq!(parse(&a, "deny").unwrap().body, json!({"optionIds": ["deny"]}));
        assert_eq!(parse(&a, "Allow").unwrap().body, json!({"optionIds": ["allow"]}));
        let always = parse(&a, "2").unwrap();
        assert_eq!(
            (always.body, always.always.as_deref()),
            (json!({"optionIds": ["allow-always"]}), Some("Allow always"))
        );
        assert!(parse(&a, "maybe").unwrap_err().contains("allow, allow-always, deny"));

        let m = ask(
            json!({"kind": "multi", "options": [{"id": "red", "label": "Red"}, {"id": "green", "label": "Green"}, {"id": "blue", "label": "Blue"}]}),
        );
        assert_eq!(parse(&m, "red, Blue red").unwrap().body, json!({"optionIds": ["red", "blue"]}));
        let t = ask(json!({"kind": "text"}));
        assert_eq!(parse(&t, "Ship it").unwrap().body, json!({"text": "Ship it"}));
        assert_eq!(
            parse(&form(), "name=\"Ana Lopez\" qty=2 gift=yes size=Medium").unwrap().body,
            json!({"values": {"name": "Ana Lopez", "qty": 2, "gift": true, "size": "m"}})
        );
        assert!(parse(&form(), "qty=many").unwrap_err().contains("not a number"));
        assert!(parse(&form(), "colour=red").unwrap_err().contains("no field"));
        assert!(parse(&ask(json!({"kind": "poll"})), "x").is_err());
    }

    #[test]
    fn drafts_answer_by_keys() {
        let a = approve();
        let mut d = Draft::new(&a);
        d.down(&a);
        assert_eq!(d.answer(&a).unwrap().always.as_deref(), Some("Allow always"));
        d.down(&a);
        d.down(&a);
        assert_eq!(d.answer(&a).unwrap().body, json!({"optionIds": ["deny"]}));

        let f = form();
        let mut d = Draft::new(&f);
        assert!(d.takes_text(&f));
        for c in "Ana".chars() {
            d.type_char(&f, c);
        }
        d.down(&f);
        d.type_char(&f, '2');
        d.down(&f);
        assert!(!d.takes_text(&f));
        d.toggle(&f);
        d.down(&f);
        d.cycle(&f, 1);
        d.cycle(&f, 1);
        assert_eq!(
            d.answer(&f).unwrap().body,
            json!({"values": {"name": "Ana", "qty": 2, "gift": true, "size": "m"}})
        );
        d.cycle(&f, -1);
        d.cycle(&f, -1);
        assert_eq!(d.fields[3], "l");

        let m = ask(
            json!({"kind": "multi", "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}]}),
        );
        let mut d = Draft::new(&m);
        d.toggle(&m);
        d.down(&m);
        d.toggle(&m);
        d.toggle(&m);
        d.toggle(&m);
        assert_eq!(d.answer(&m).unwrap().body, json!({"optionIds": ["red", "blue"]}));
    }

    #[test]
    fn words_keep_quoted_parts() {
        assert_eq!(words(r#"a=1  b="x y" c="""#), ["a=1", "b=x y", "c="]);
    }
}
