//! Asks: the card an agent raises and the answer it gets (contract §7).
//!
//! [`AskSpec`] is what the program gives; [`AskSpec::build`] applies every
//! rule and yields the wire [`Ask`] with its id and hash. [`AnswerBody`] is
//! what the phone sends; [`AnswerBody::fit`] checks it against the ask.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::constants::{ask_limits as lim, item_limits};
use crate::text::{check_title, is_blank, quoted, sanitize_body, sanitize_line, sanitize_line_chars};
use crate::{
    Id, PUSH_LINE_MAX, PUSH_TITLE_MAX, REASON_MAX, RuleError, TITLE_MAX, Timestamp, arguments_view, ask_hash,
    ask_id_for, call_summary,
};

/// A text rule applied in place (`text::sanitize_*`): true when it changed the text.
type Rule = fn(&mut String, usize) -> bool;

fn is_false(b: &bool) -> bool {
    !*b
}

/// Who decided an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DecidedBy {
    /// The person, from the phone.
    Phone,
    /// The program (it answered itself, aborted, stopped or closed).
    Program,
    /// The ask passed its `expiresAt`.
    Timeout,
}

impl DecidedBy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Phone => "phone",
            DecidedBy::Program => "program",
            DecidedBy::Timeout => "timeout",
        }
    }
}

/// How an ask closed, in its `ask-closed` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Outcome {
    /// An answer came (from the phone or the program).
    Answered,
    /// It expired.
    Timeout,
    /// It was aborted (signal, stop, close).
    Aborted,
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Outcome {
    /// The wire word: `answered`, `timeout` or `aborted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Timeout => "timeout",
            Outcome::Aborted => "aborted",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The look of a choice option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum OptionStyle {
    /// The default look.
    Default,
    /// The main action.
    Primary,
    /// A destructive action.
    Danger,
}

/// One option of a `choice` or `multi` ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskOption {
    /// The option id (ID rule, checked when the ask is built).
    pub id: String,
    /// The label (64 B).
    pub label: String,
    /// The look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<OptionStyle>,
    /// An allow-always option: picking it lets later calls through.
    #[serde(default, skip_serializing_if = "is_false")]
    pub always: bool,
}

impl AskOption {
    /// An option. Panics never: a bad id is reported when the ask is built.
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> Self {
        AskOption { id: id.into(), label: label.into(), style: None, always: false }
    }

    /// Sets the style.
    pub fn style(mut self, style: OptionStyle) -> Self {
        self.style = Some(style);
        self
    }

    /// Marks the option as allow-always.
    pub fn always(mut self) -> Self {
        self.always = true;
        self
    }
}

/// The type of a form field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FieldType {
    /// A string.
    Text,
    /// A JSON number.
    Number,
    /// `true` or `false`.
    Bool,
    /// One of the field's options, by id.
    Select,
}

/// A choice of a `select` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectOption {
    /// The id (ID rule, checked when the ask is built).
    pub id: String,
    /// The label (64 B).
    pub label: String,
}

/// One field of a `form` ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormField {
    /// The field id (ID rule, checked when the ask is built).
    pub id: String,
    /// The label (256 B).
    pub label: String,
    /// The type.
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// Whether an answer must give it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// The choices of a `select` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<SelectOption>>,
}

impl FormField {
    /// A field.
    pub fn new(id: impl Into<String>, label: impl Into<String>, field_type: FieldType) -> Self {
        FormField { id: id.into(), label: label.into(), field_type, required: false, options: None }
    }

    /// Marks the field required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Sets a `select` field's choices, as `(id, label)` pairs.
    pub fn options<I, S, T>(mut self, options: I) -> Self
    where
        I: IntoIterator<Item = (S, T)>,
        S: Into<String>,
        T: Into<String>,
    {
        self.options = Some(
            options
                .into_iter()
                .map(|(id, label)| SelectOption { id: id.into(), label: label.into() })
                .collect(),
        );
        self
    }
}

/// The kind of an ask and its card fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[non_exhaustive]
pub enum AskKind {
    /// One option of 1 to 8.
    Choice {
        /// The options.
        options: Vec<AskOption>,
    },
    /// Several options of 1 to 16.
    Multi {
        /// The options.
        options: Vec<AskOption>,
        /// The fewest picks (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u32>,
        /// The most picks (default: the number of options).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
    },
    /// A line or text to type.
    Text {
        /// A hint shown in the empty field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
        /// Whether the field takes several lines.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        multiline: Option<bool>,
        /// The longest answer in bytes (at most 64 KiB).
        #[serde(rename = "maxBytes", default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u32>,
    },
    /// A set of fields.
    Form {
        /// 1 to 16 fields.
        fields: Vec<FormField>,
    },
}

impl AskKind {
    /// The wire name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            AskKind::Choice { .. } => "choice",
            AskKind::Multi { .. } => "multi",
            AskKind::Text { .. } => "text",
            AskKind::Form { .. } => "form",
        }
    }

    /// Whether any option is allow-always.
    pub fn has_always(&self) -> bool {
        match self {
            AskKind::Choice { options } | AskKind::Multi { options, .. } => options.iter().any(|o| o.always),
            _ => false,
        }
    }
}

/// The tool an ask is about: name, the call on one line, and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// The call on one line, e.g. `refund(order: "5521", amount: 40)`.
    pub call: String,
    /// The `key: value` pairs, each value as JSON (possibly empty).
    pub args: Vec<(String, String)>,
}

impl ToolInfo {
    /// Builds the tool line from the call itself: [`call_summary`] and
    /// [`arguments_view`].
    pub fn from_call(name: &str, args: &Value) -> Self {
        ToolInfo { name: name.to_owned(), call: call_summary(name, args), args: arguments_view(args) }
    }
}

/// The push notification text. A push with neither title nor line is never
/// sent: [`AskSpec::build`] drops it and [`Ask`] does not serialize it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    /// The title (60 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The line (120 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

impl Push {
    /// True when the push has neither title nor line.
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.line.is_none()
    }
}

/// Whether an ask's `push` is left off the wire: absent, or with nothing in it.
fn push_is_absent(push: &Option<Push>) -> bool {
    push.as_ref().is_none_or(Push::is_empty)
}

/// An ask as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// `ask_id_for(pane, toolCallId)`.
    pub id: String,
    /// The pane.
    pub pane: Id,
    /// The kind and its card fields.
    #[serde(flatten)]
    pub kind: AskKind,
    /// The title (256 B).
    pub title: String,
    /// Why the agent asks (2 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The chat item the card belongs to.
    pub item_id: Id,
    /// The tool call it is about (the id's source).
    pub tool_call_id: Id,
    /// The tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolInfo>,
    /// The push text (left out when it has neither title nor line).
    #[serde(default, skip_serializing_if = "push_is_absent")]
    pub push: Option<Push>,
    /// When it was raised.
    pub created_at: Timestamp,
    /// When it times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// True only for a `choice` without an `always` option.
    pub readable: bool,
    /// True when any text was truncated or sanitized.
    pub cleaned: bool,
    /// The hash of the question (see [`ask_hash`]).
    pub hash: String,
}

/// When an ask expires, as the program gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expiry {
    /// An absolute time.
    At(Timestamp),
    /// An ISO 8601 string with offset (parsed when the ask is built).
    Iso(String),
    /// A duration from the moment the ask is raised, in milliseconds.
    In(u64),
}

/// What the program gives to raise an ask. Build with [`AskSpec::choice`],
/// [`AskSpec::multi`], [`AskSpec::text`] or [`AskSpec::form`], then the
/// setters. The id is never given: it is `ask_id_for(pane, tool_call_id)`.
#[derive(Debug, Clone, PartialEq)]
pub struct AskSpec {
    /// The kind and its fields.
    pub kind: AskKind,
    /// The tool call id.
    pub tool_call_id: String,
    /// The chat item id (default: the tool call id).
    pub item_id: Option<String>,
    /// The title.
    pub title: String,
    /// The reason.
    pub reason: Option<String>,
    /// The tool.
    pub tool: Option<ToolInfo>,
    /// The push text.
    pub push: Option<Push>,
    /// The expiry.
    pub expires: Option<Expiry>,
    /// A small value of the agent's own, kept with the ask by a receipt
    /// store that keeps asks and handed back with it after a restart, to
    /// find the work the ask stands for. Never sent to the phone, and not
    /// part of the hash. At most [`AGENT_DATA_MAX`] bytes of JSON.
    pub agent_data: Option<Value>,
}

/// The most bytes an ask's [`agent_data`](AskSpec::agent_data) takes, as
/// compact JSON.
pub const AGENT_DATA_MAX: usize = 4096;

impl AskSpec {
    fn new(kind: AskKind, tool_call_id: impl Into<String>, title: impl Into<String>) -> Self {
        AskSpec {
            kind,
            tool_call_id: tool_call_id.into(),
            item_id: None,
            title: title.into(),
            reason: None,
            tool: None,
            push: None,
            expires: None,
            agent_data: None,
        }
    }

    /// A `choice` ask: one option of 1 to 8.
    pub fn choice(
        tool_call_id: impl Into<String>,
        title: impl Into<String>,
        options: impl IntoIterator<Item = AskOption>,
    ) -> Self {
        Self::new(AskKind::Choice { options: options.into_iter().collect() }, tool_call_id, title)
    }

    /// A `multi` ask: several options of 1 to 16.
    pub fn multi(
        tool_call_id: impl Into<String>,
        title: impl Into<String>,
        options: impl IntoIterator<Item = AskOption>,
    ) -> Self {
        Self::new(
            AskKind::Multi { options: options.into_iter().collect(), min: None, max: None },
            tool_call_id,
            title,
        )
    }

    /// A `text` ask.
    pub fn text(tool_call_id: impl Into<String>, title: impl Into<String>) -> Self {
        Self::new(AskKind::Text { placeholder: None, multiline: None, max_bytes: None }, tool_call_id, title)
    }

    /// A `form` ask: 1 to 16 fields.
    pub fn form(
        tool_call_id: impl Into<String>,
        title: impl Into<String>,
        fields: impl IntoIterator<Item = FormField>,
    ) -> Self {
        Self::new(AskKind::Form { fields: fields.into_iter().collect() }, tool_call_id, title)
    }

    /// Sets the chat item id.
    pub fn item_id(mut self, id: impl Into<String>) -> Self {
        self.item_id = Some(id.into());
        self
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the tool.
    pub fn tool(mut self, tool: ToolInfo) -> Self {
        self.tool = Some(tool);
        self
    }

    /// Sets the push title.
    pub fn push_title(mut self, title: impl Into<String>) -> Self {
        self.push.get_or_insert_with(Push::default).title = Some(title.into());
        self
    }

    /// Sets the push line.
    pub fn push_line(mut self, line: impl Into<String>) -> Self {
        self.push.get_or_insert_with(Push::default).line = Some(line.into());
        self
    }

    /// Expires at a time.
    pub fn expires_at(mut self, at: Timestamp) -> Self {
        self.expires = Some(Expiry::At(at));
        self
    }

    /// Expires at an ISO 8601 time with offset; one without offset is an
    /// error when the ask is raised.
    pub fn expires_at_iso(mut self, at: impl Into<String>) -> Self {
        self.expires = Some(Expiry::Iso(at.into()));
        self
    }

    /// Expires `ms` milliseconds after it is raised.
    pub fn expires_in_ms(mut self, ms: u64) -> Self {
        self.expires = Some(Expiry::In(ms));
        self
    }

    /// For `multi`: the fewest and most picks.
    pub fn picks(mut self, min: u32, max: u32) -> Self {
        if let AskKind::Multi { min: lo, max: hi, .. } = &mut self.kind {
            *lo = Some(min);
            *hi = Some(max);
        }
        self
    }

    /// For `text`: the placeholder, multiline flag and byte limit.
    pub fn text_field(
        mut self,
        placeholder: Option<String>,
        multiline: Option<bool>,
        max_bytes: Option<u32>,
    ) -> Self {
        if let AskKind::Text { placeholder: p, multiline: m, max_bytes: b } = &mut self.kind {
            *p = placeholder;
            *m = multiline;
            *b = max_bytes;
        }
        self
    }

    /// Keeps `data` with the ask, for the agent after a restart (see
    /// [`agent_data`](Self::agent_data)).
    pub fn agent_data(mut self, data: Value) -> Self {
        self.agent_data = Some(data);
        self
    }

    /// The card of an ask raised before, to raise it again: the same kind,
    /// words, tool line, options, item and expiry, so the same id and hash.
    pub fn from_ask(ask: &Ask) -> AskSpec {
        AskSpec {
            kind: ask.kind.clone(),
            tool_call_id: ask.tool_call_id.to_string(),
            item_id: Some(ask.item_id.to_string()),
            title: ask.title.clone(),
            reason: ask.reason.clone(),
            tool: ask.tool.clone(),
            push: ask.push.clone(),
            expires: ask.expires_at.map(Expiry::At),
            agent_data: None,
        }
    }

    /// Applies every rule of §7 and builds the wire ask for `pane`, raised at
    /// `now`. `allow_always` false makes an `always` option an error.
    pub fn build(self, pane: &Id, now: Timestamp, allow_always: bool) -> Result<Ask, RuleError> {
        let tool_call_id = Id::new(self.tool_call_id).map_err(|e| ctx(e, "toolCallId"))?;
        if let Some(data) = &self.agent_data {
            let bytes = serde_json::to_vec(data).map_or(usize::MAX, |v| v.len());
            if bytes > AGENT_DATA_MAX {
                return Err(RuleError::out_of_range(
                    "agentData",
                    format!(
                        "ask rule: the agent data of tool call {} is {bytes} bytes of JSON, more than {AGENT_DATA_MAX}: keep a key to your own store instead",
                        quoted(tool_call_id.as_str())
                    ),
                ));
            }
        }
        let item_id = match self.item_id {
            Some(s) => Id::new(s).map_err(|e| ctx(e, "itemId"))?,
            None => tool_call_id.clone(),
        };
        let mut cleaned = false;
        let mut take = |mut text: String, rule: Rule, max: usize| {
            cleaned |= rule(&mut text, max);
            text
        };
        let title = take(self.title, sanitize_line, TITLE_MAX);
        check_title(&title, "title", &format!("the ask for tool call {}", quoted(tool_call_id.as_str())))?;
        let reason = self.reason.map(|r| take(r, sanitize_body, REASON_MAX));
        let tool = self.tool.map(|t| ToolInfo {
            name: take(t.name, sanitize_line, item_limits::TOOL_NAME),
            call: take(t.call, sanitize_line, item_limits::TOOL_CALL),
            args: t
                .args
                .into_iter()
                .map(|(k, v)| {
                    (
                        take(k, sanitize_line, item_limits::TOOL_CALL),
                        take(v, sanitize_line, item_limits::TOOL_CALL),
                    )
                })
                .collect(),
        });
        if let Some(tool) = tool.as_ref().filter(|t| is_blank(&t.name)) {
            return Err(RuleError::invalid(
                "tool",
                format!(
                    "ask rule: the tool of the ask for tool call {} has an empty name {:?} (once control and invisible characters are removed): name the tool the card asks about",
                    quoted(tool_call_id.as_str()),
                    tool.name
                ),
            ));
        }
        // A push text that is empty once cleaned is left out, and a push with
        // neither title nor line is dropped: never `"push":{}`.
        let push = self
            .push
            .map(|p| Push {
                title: p
                    .title
                    .map(|t| take(t, sanitize_line_chars, PUSH_TITLE_MAX))
                    .filter(|t| !t.is_empty()),
                line: p.line.map(|l| take(l, sanitize_line_chars, PUSH_LINE_MAX)).filter(|l| !l.is_empty()),
            })
            .filter(|p| !p.is_empty());
        let kind = check_kind(self.kind, allow_always, &mut take)?;
        let expires_at = match self.expires {
            None => None,
            Some(Expiry::At(t)) => Some(t),
            Some(Expiry::Iso(s)) => Some(Timestamp::parse(&s).map_err(|e| ctx(e, "expiresAt"))?),
            Some(Expiry::In(ms)) => Some(now.plus_millis(ms)),
        };
        if expires_at.is_some_and(|t| t > Timestamp::MAX) {
            return Err(RuleError::out_of_range(
                "expiresAt",
                "ask rule: expiresAt is after 9999-12-31T23:59:59.999Z, which the wire cannot write (omit it for no expiry)",
            ));
        }
        let readable = matches!(kind, AskKind::Choice { .. }) && !kind.has_always();
        let mut ask = Ask {
            id: ask_id_for(pane.as_str(), tool_call_id.as_str()),
            pane: pane.clone(),
            kind,
            title,
            reason,
            item_id,
            tool_call_id,
            tool,
            push,
            created_at: now,
            expires_at,
            readable,
            cleaned,
            hash: String::new(),
        };
        ask.hash = ask.compute_hash();
        Ok(ask)
    }
}

/// Names the ask field an error came from, keeping the error's kind and rule.
fn ctx(e: RuleError, field: &str) -> RuleError {
    e.with_context(&format!("ask {field}"))
}

fn check_options(
    options: Vec<AskOption>,
    max: usize,
    kind: &str,
    allow_always: bool,
    take: &mut impl FnMut(String, Rule, usize) -> String,
) -> Result<Vec<AskOption>, RuleError> {
    if options.is_empty() || options.len() > max {
        return Err(RuleError::out_of_range(
            "options",
            format!("ask rule: a {kind} has 1 to {max} options, this one has {}", options.len()),
        ));
    }
    // At most 16 options: a scan of those kept finds a repeated id with
    // no set to build (an approval raises two options per tool call).
    let mut kept: Vec<AskOption> = Vec::with_capacity(options.len());
    for o in options {
        let id = Id::new(o.id).map_err(|e| ctx(e, "option id"))?.into_string();
        if kept.iter().any(|k| k.id == id) {
            return Err(RuleError::invalid("options", format!("ask rule: option id {id:?} is given twice")));
        }
        if o.always && !allow_always {
            return Err(RuleError::invalid(
                "allow-always",
                "ask rule: allow-always options are off for this agent (served over HTTPS, or built with allow_always(false)): check Collie::allow_always before offering one",
            ));
        }
        if o.always && kind != "choice" {
            return Err(RuleError::invalid(
                "allow-always",
                "ask rule: only a choice may carry an allow-always option",
            ));
        }
        kept.push(AskOption {
            id,
            label: take(o.label, sanitize_line, lim::OPTION_LABEL),
            style: o.style,
            always: o.always,
        });
    }
    Ok(kept)
}

fn check_kind(
    kind: AskKind,
    allow_always: bool,
    take: &mut impl FnMut(String, Rule, usize) -> String,
) -> Result<AskKind, RuleError> {
    Ok(match kind {
        AskKind::Choice { options } => AskKind::Choice {
            options: check_options(options, lim::CHOICE_OPTIONS, "choice", allow_always, take)?,
        },
        AskKind::Multi { options, min, max } => {
            let options = check_options(options, lim::MULTI_OPTIONS, "multi", allow_always, take)?;
            let n = options.len() as u32;
            let (lo, hi) = (min.unwrap_or(1), max.unwrap_or(n));
            if lo > hi || hi > n || hi == 0 {
                return Err(RuleError::out_of_range(
                    "picks",
                    format!(
                        "ask rule: a multi needs min ≤ max ≤ {n} options and max ≥ 1 (got min {lo}, max {hi})"
                    ),
                ));
            }
            AskKind::Multi { options, min, max }
        }
        AskKind::Text { placeholder, multiline, max_bytes } => {
            if let Some(b) = max_bytes {
                if b == 0 || b as usize > lim::TEXT_MAX_BYTES {
                    return Err(RuleError::out_of_range(
                        "maxBytes",
                        format!("ask rule: maxBytes is 1 to {} (got {b})", lim::TEXT_MAX_BYTES),
                    ));
                }
            }
            AskKind::Text {
                placeholder: placeholder.map(|p| take(p, sanitize_line, lim::PLACEHOLDER)),
                multiline,
                max_bytes,
            }
        }
        AskKind::Form { fields } => {
            if fields.is_empty() || fields.len() > lim::FORM_FIELDS {
                return Err(RuleError::out_of_range(
                    "fields",
                    format!(
                        "ask rule: a form has 1 to {} fields, this one has {}",
                        lim::FORM_FIELDS,
                        fields.len()
                    ),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            let fields = fields
                .into_iter()
                .map(|f| {
                    let id = Id::new(f.id).map_err(|e| ctx(e, "field id"))?.into_string();
                    if !seen.insert(id.clone()) {
                        return Err(RuleError::invalid(
                            "fields",
                            format!("ask rule: field id {id:?} is given twice"),
                        ));
                    }
                    let options = match (f.field_type, f.options) {
                        (FieldType::Select, Some(opts)) if !opts.is_empty() => Some(
                            opts.into_iter()
                                .map(|o| {
                                    Ok(SelectOption {
                                        id: Id::new(o.id)
                                            .map_err(|e| ctx(e, "select option id"))?
                                            .into_string(),
                                        label: take(o.label, sanitize_line, lim::OPTION_LABEL),
                                    })
                                })
                                .collect::<Result<Vec<_>, RuleError>>()?,
                        ),
                        (FieldType::Select, _) => {
                            return Err(RuleError::invalid(
                                "fields",
                                format!("ask rule: select field {id:?} needs options"),
                            ));
                        }
                        (_, Some(_)) => {
                            return Err(RuleError::invalid(
                                "fields",
                                format!("ask rule: only a select field takes options ({id:?})"),
                            ));
                        }
                        (_, None) => None,
                    };
                    Ok(FormField {
                        id,
                        label: take(f.label, sanitize_line, lim::FIELD_LABEL),
                        field_type: f.field_type,
                        required: f.required,
                        options,
                    })
                })
                .collect::<Result<Vec<_>, RuleError>>()?;
            AskKind::Form { fields }
        }
    })
}

impl Ask {
    /// The hash of this ask as it is sent (see [`ask_hash`]).
    pub fn compute_hash(&self) -> String {
        // Written from the typed ask, not through a `Value` (`canonical.rs`
        // says why); the same bytes, which debug builds check.
        let hash = crate::hash::ask_hash_of(self);
        debug_assert_eq!(
            hash,
            ask_hash(&serde_json::to_value(self).unwrap_or(Value::Null)),
            "the typed ask's hash differs from its Value's"
        );
        hash
    }

    /// Whether picking `option_id` is an allow-always pick.
    pub fn is_always_option(&self, option_id: &str) -> bool {
        match &self.kind {
            AskKind::Choice { options } | AskKind::Multi { options, .. } => {
                options.iter().any(|o| o.always && o.id == option_id)
            }
            _ => false,
        }
    }
}

/// An answer, typed by the ask's kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Answer {
    /// `choice` and `multi`: the picked option ids.
    Options {
        /// The ids, one for `choice`.
        #[serde(rename = "optionIds")]
        option_ids: Vec<String>,
    },
    /// `text`: the text.
    Text {
        /// The text.
        text: String,
    },
    /// `form`: a value per field.
    Values {
        /// Field id → value.
        values: Map<String, Value>,
    },
}

impl Answer {
    /// A `choice` answer.
    pub fn option(id: impl Into<String>) -> Self {
        Answer::Options { option_ids: vec![id.into()] }
    }

    /// The picked option ids (empty for text and form answers).
    pub fn option_ids(&self) -> &[String] {
        match self {
            Answer::Options { option_ids } => option_ids,
            _ => &[],
        }
    }

    /// The first picked option id.
    pub fn option_id(&self) -> Option<&str> {
        self.option_ids().first().map(String::as_str)
    }

    /// The text of a text answer.
    pub fn text(&self) -> Option<&str> {
        match self {
            Answer::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The values of a form answer.
    pub fn values(&self) -> Option<&Map<String, Value>> {
        match self {
            Answer::Values { values } => Some(values),
            _ => None,
        }
    }

    /// The wire object, e.g. `{"optionIds":["yes"]}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The `answer` object of an answer request, as typed as JSON lets it be
/// before it meets its ask.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerBody {
    /// `optionIds`, when present.
    pub option_ids: Option<Vec<String>>,
    /// `text`, when present.
    pub text: Option<String>,
    /// `values`, when present.
    pub values: Option<Map<String, Value>>,
}

impl AnswerBody {
    /// Checks the answer against the ask (§7 "Kinds and answers"); the error
    /// says what does not fit.
    pub fn fit(&self, kind: &AskKind) -> Result<Answer, String> {
        match kind {
            AskKind::Choice { options } => {
                let ids = self.option_ids.as_ref().ok_or("a choice answer needs optionIds")?;
                if ids.len() != 1 {
                    return Err(format!("a choice answer picks exactly one option, not {}", ids.len()));
                }
                if !options.iter().any(|o| o.id == ids[0].as_str()) {
                    return Err(format!("unknown option {:?}", ids[0]));
                }
                Ok(Answer::Options { option_ids: ids.clone() })
            }
            AskKind::Multi { options, min, max } => {
                let ids = self.option_ids.as_ref().ok_or("a multi answer needs optionIds")?;
                let (lo, hi) = (min.unwrap_or(1) as usize, max.map_or(options.len(), |m| m as usize));
                if let Some(bad) = ids.iter().find(|id| !options.iter().any(|o| o.id == id.as_str())) {
                    return Err(format!("unknown option {bad:?}"));
                }
                let mut uniq = ids.clone();
                uniq.sort();
                uniq.dedup();
                if uniq.len() != ids.len() {
                    return Err("an option is picked twice".into());
                }
                if ids.len() < lo || ids.len() > hi {
                    return Err(format!("a multi answer picks {lo} to {hi} options, not {}", ids.len()));
                }
                Ok(Answer::Options { option_ids: ids.clone() })
            }
            AskKind::Text { max_bytes, .. } => {
                let text = self.text.as_ref().ok_or("a text answer needs text")?;
                let max = max_bytes.map_or(lim::TEXT_MAX_BYTES, |m| m as usize);
                if text.len() > max {
                    return Err(format!("the text is {} bytes, over the ask's {max}", text.len()));
                }
                Ok(Answer::Text { text: text.clone() })
            }
            AskKind::Form { fields } => {
                let values = self.values.as_ref().ok_or("a form answer needs values")?;
                if let Some(k) = values.keys().find(|k| !fields.iter().any(|f| f.id == **k)) {
                    return Err(format!("unknown field {k:?}"));
                }
                for f in fields {
                    match values.get(&f.id) {
                        None | Some(Value::Null) if f.required => {
                            return Err(format!("field {:?} is required", f.id.as_str()));
                        }
                        None | Some(Value::Null) => {}
                        Some(v) => {
                            let ok = match f.field_type {
                                FieldType::Text => v.is_string(),
                                FieldType::Number => v.is_number(),
                                FieldType::Bool => v.is_boolean(),
                                FieldType::Select => v.as_str().is_some_and(|s| {
                                    f.options.as_ref().is_some_and(|o| o.iter().any(|o| o.id == s))
                                }),
                                #[allow(unreachable_patterns)]
                                _ => false,
                            };
                            if !ok {
                                return Err(format!(
                                    "field {:?} has a value of the wrong type",
                                    f.id.as_str()
                                ));
                            }
                        }
                    }
                }
                Ok(Answer::Values { values: values.clone() })
            }
        }
    }
}

/// `POST /v1/asks/{askId}`, parsed by the §7.1 step 1 rules.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRequest {
    /// The request id.
    pub request_id: Id,
    /// The answer object.
    pub answer: AnswerBody,
    /// The hash of the ask the person saw, when given, in lowercase (the
    /// request may write it in either case).
    pub hash: Option<String>,
    /// The second tap for an allow-always pick.
    pub confirm_always: bool,
}

impl AnswerRequest {
    /// Parses a body. Errors (step 1): not JSON, `requestId` missing or
    /// breaking the ID rule, `answer` missing or not an object, `optionIds`
    /// not a list of strings, any field of the wrong JSON type, `hash` present
    /// but not 64 hex characters (`null` included). The hash may be written
    /// in either case; it is lowercased here, so a hash that differs from the
    /// ask's only by case matches (the wire's *Decisions of this SDK*:
    /// [`durable_sdk::wire`](https://docs.rs/durable-sdk/latest/durable_sdk/wire/index.html)).
    pub fn parse(body: &[u8]) -> Result<AnswerRequest, String> {
        let obj = crate::fields::object(body)?;
        let request_id = crate::fields::request_id(&obj)?;
        let answer = crate::fields::opt_object(&obj, "answer")?.ok_or("answer is missing")?;
        let option_ids =
            answer.parsed::<Vec<String>>("optionIds", || "optionIds must be a list of strings".into())?;
        let text = answer.parsed::<String>("text", || "text must be a string".into())?;
        let values = answer.parsed::<Map<String, Value>>("values", || "values must be an object".into())?;
        let hash = match obj.parsed::<String>("hash", || "hash must be 64 hex characters".into())? {
            None => None,
            Some(mut h) if crate::is_hash_any_case(&h) => {
                h.make_ascii_lowercase();
                Some(h)
            }
            Some(_) => return Err("hash must be 64 hex characters".into()),
        };
        let confirm_always = obj
            .parsed::<bool>("confirmAlways", || "confirmAlways must be true or false".into())?
            .unwrap_or(false);
        Ok(AnswerRequest {
            request_id,
            answer: AnswerBody { option_ids, text, values },
            hash,
            confirm_always,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane() -> Id {
        Id::new("ticket-1").unwrap()
    }

    fn approval() -> AskSpec {
        AskSpec::choice(
            "call-1",
            "refund wants to run",
            [AskOption::new("allow", "Allow"), AskOption::new("deny", "Deny")],
        )
        .tool(ToolInfo::from_call("refund", &serde_json::json!({"order": "5521", "amount": 40})))
        .push_title("refund needs a yes")
    }

    #[test]
    fn require_approval_shape_gives_the_contract_id_and_hash() {
        let ask = approval().build(&pane(), Timestamp::from_millis(0), true).unwrap();
        assert_eq!(ask.id, "970f8a0b30368fbbcab73013d31d2d51");
        assert_eq!(ask.hash, "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce");
        assert!(ask.readable);
        assert!(!ask.cleaned);
    }

    #[test]
    fn an_option_id_given_twice_is_refused_by_name() {
        let spec = AskSpec::choice(
            "call-1",
            "pick one",
            [AskOption::new("a", "A"), AskOption::new("b", "B"), AskOption::new("a", "A again")],
        );
        let e = spec.build(&pane(), Timestamp::from_millis(0), true).unwrap_err();
        assert!(e.to_string().contains(r#"option id "a" is given twice"#), "{e}");
        let ok = AskSpec::choice("call-1", "pick one", [AskOption::new("a", "A"), AskOption::new("b", "B")]);
        let ask = ok.build(&pane(), Timestamp::from_millis(0), true).unwrap();
        let AskKind::Choice { options } = &ask.kind else { panic!("a choice: {:?}", ask.kind) };
        let ids: Vec<&str> = options.iter().map(|o| o.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "kept in order");
    }

    #[test]
    fn hash_leaves_out_expiry_and_creation_time() {
        let a = approval().build(&pane(), Timestamp::from_millis(0), true).unwrap();
        let b = approval().expires_in_ms(5000).build(&pane(), Timestamp::from_millis(99), true).unwrap();
        assert_eq!(a.hash, b.hash);
    }

    #[test]
    fn always_option_is_an_error_when_allow_always_is_off() {
        let spec = AskSpec::choice("c", "t", [AskOption::new("allow-always", "Always").always()]);
        let e = spec.clone().build(&pane(), Timestamp::EPOCH, false).unwrap_err();
        assert!(e.is_invalid_argument());
        let ask = spec.build(&pane(), Timestamp::EPOCH, true).unwrap();
        assert!(!ask.readable, "a choice with an always option is not readable");
    }

    #[test]
    fn choice_has_one_to_eight_options() {
        let nine = (0..9).map(|i| AskOption::new(format!("o{i}"), "x"));
        assert!(
            AskSpec::choice("c", "t", nine)
                .build(&pane(), Timestamp::EPOCH, true)
                .unwrap_err()
                .is_out_of_range()
        );
        assert!(AskSpec::choice("c", "t", []).build(&pane(), Timestamp::EPOCH, true).is_err());
    }

    #[test]
    fn an_expiry_past_the_year_9999_is_out_of_range() {
        let e =
            approval().expires_in_ms(u64::MAX).build(&pane(), Timestamp::from_millis(1), true).unwrap_err();
        assert!(e.is_out_of_range(), "{e:?}");
        assert_eq!(Timestamp::from_millis(u64::MAX).to_rfc3339(), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn expiry_without_offset_is_an_error() {
        let e = approval()
            .expires_at_iso("2026-11-30T05:00:00")
            .build(&pane(), Timestamp::EPOCH, true)
            .unwrap_err();
        assert_eq!(e.rule(), "time");
    }

    #[test]
    fn cleaned_is_set_when_text_was_sanitized() {
        let ask = AskSpec::text("c", "a\u{202E}b").build(&pane(), Timestamp::EPOCH, true).unwrap();
        assert!(ask.cleaned);
        assert_eq!(ask.title, "ab");
    }

    #[test]
    fn answer_fit_checks_kind_rules() {
        let multi = AskSpec::multi("c", "t", ["r", "g", "b"].map(|c| AskOption::new(c, c))).picks(1, 2);
        let kind = multi.build(&pane(), Timestamp::EPOCH, true).unwrap().kind;
        let body = |ids: &[&str]| AnswerBody {
            option_ids: Some(ids.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        assert!(body(&["r", "g"]).fit(&kind).is_ok());
        assert!(body(&["r", "g", "b"]).fit(&kind).is_err());
        assert!(body(&[]).fit(&kind).is_err());
        assert!(body(&["x"]).fit(&kind).is_err());
        assert!(body(&["r", "r"]).fit(&kind).is_err());
    }

    #[test]
    fn ask_rule_errors_keep_their_kind_when_named_by_field() {
        // A time before 1970 is a range error of the time rule, also inside an ask.
        let e = approval()
            .expires_at_iso("1969-12-31T23:59:59.000Z")
            .build(&pane(), Timestamp::EPOCH, true)
            .unwrap_err();
        assert!(e.is_out_of_range(), "{e:?}");
        assert_eq!(e.rule(), "time");
        assert!(e.to_string().starts_with("ask expiresAt: "), "{e}");
        // A bad id stays an invalid argument of the id rule.
        let e = AskSpec::text("call 1", "t").build(&pane(), Timestamp::EPOCH, true).unwrap_err();
        assert!(e.is_invalid_argument());
        assert_eq!(e.rule(), "id");
        assert!(e.to_string().starts_with("ask toolCallId: "), "{e}");
    }

    #[test]
    fn push_rule_drops_a_push_with_neither_title_nor_line() {
        let bare = AskSpec::text("c", "t").build(&pane(), Timestamp::EPOCH, true).unwrap();
        // Both setters given texts that clean down to nothing.
        let spec = AskSpec::text("c", "t").push_title("\u{200B}").push_line("\u{2028}");
        let ask = spec.build(&pane(), Timestamp::EPOCH, true).unwrap();
        assert_eq!(ask.push, None);
        assert!(ask.cleaned);
        assert_eq!(ask.hash, bare.hash, "an empty push is not in the hash");
        let wire = serde_json::to_value(&ask).unwrap();
        assert!(wire.get("push").is_none(), "{wire}");
        // An empty push set by hand is not serialized either.
        let mut by_hand = bare.clone();
        by_hand.push = Some(Push::default());
        assert!(serde_json::to_value(&by_hand).unwrap().get("push").is_none());
        assert_eq!(by_hand.compute_hash(), bare.hash);
        // A push with only a line keeps just the line.
        let ask =
            AskSpec::text("c", "t").push_line("Maria asks").build(&pane(), Timestamp::EPOCH, true).unwrap();
        assert_eq!(ask.push, Some(Push { title: None, line: Some("Maria asks".into()) }));
    }

    #[test]
    fn hash_rule_answer_hash_is_64_hex_of_either_case_and_lowercased() {
        let lower = "cb8b64234d06250d254d479dcdd28c57083cae57ba257f035c7f409be9de57ce";
        let body =
            |h: &str| format!(r#"{{"requestId":"r","answer":{{"optionIds":["allow"]}},"hash":"{h}"}}"#);
        let upper = AnswerRequest::parse(body(&lower.to_uppercase()).as_bytes()).unwrap();
        assert_eq!(upper.hash.as_deref(), Some(lower));
        let mixed: String = lower
            .chars()
            .enumerate()
            .map(|(i, c)| if i % 2 == 0 { c.to_ascii_uppercase() } else { c })
            .collect();
        assert_eq!(AnswerRequest::parse(body(&mixed).as_bytes()).unwrap().hash.as_deref(), Some(lower));
        assert_eq!(AnswerRequest::parse(body(lower).as_bytes()).unwrap().hash.as_deref(), Some(lower));
        // The hash of a built ask compares equal to an uppercase hash once parsed.
        let ask = approval().build(&pane(), Timestamp::EPOCH, true).unwrap();
        assert_eq!(upper.hash.as_deref(), Some(ask.hash.as_str()));
        for bad in [&lower[..63], &format!("{lower}0"), &lower.replacen('c', "g", 1), ""] {
            assert!(AnswerRequest::parse(body(bad).as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn answer_request_step_one_refuses_null_hash() {
        assert!(AnswerRequest::parse(br#"{"requestId":"r","answer":{},"hash":null}"#).is_err());
        assert!(AnswerRequest::parse(br#"{"requestId":"r","answer":{"optionIds":[1]}}"#).is_err());
        assert!(AnswerRequest::parse(br#"{"requestId":"r/1","answer":{}}"#).is_err());
        assert!(AnswerRequest::parse(br#"{"requestId":"r","answer":[]}"#).is_err());
        let ok =
            AnswerRequest::parse(br#"{"requestId":"r","answer":{"optionIds":["a"]},"confirmAlways":true}"#)
                .unwrap();
        assert!(ok.confirm_always);
    }
}

#[cfg(test)]
mod wire_words {
    use super::{DecidedBy, Outcome};

    #[test]
    fn outcome_and_decided_by_print_their_wire_words() {
        for (o, w) in
            [(Outcome::Answered, "answered"), (Outcome::Timeout, "timeout"), (Outcome::Aborted, "aborted")]
        {
            assert_eq!((o.as_str(), o.to_string()), (w, w.to_owned()));
            assert_eq!(serde_json::to_value(o).unwrap(), w);
        }
        for (d, w) in
            [(DecidedBy::Phone, "phone"), (DecidedBy::Program, "program"), (DecidedBy::Timeout, "timeout")]
        {
            assert_eq!(d.to_string(), w);
            assert_eq!(serde_json::to_value(d).unwrap(), w);
        }
    }
}
