//! Items: what a pane's chat view shows (contract §6.1), and their rules.

use serde::{Deserialize, Serialize};

use crate::constants::item_limits as lim;
use crate::text::{clean_line, sanitize_body, sanitize_line};
use crate::{Id, RuleError, Timestamp};

fn is_false(b: &bool) -> bool {
    !*b
}

/// One item of a pane's view: an id, an optional time, and its kind's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The item id (ID rule). Writing a known id again replaces the item.
    pub id: Id,
    /// When the item was written, if the program says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<Timestamp>,
    /// The kind and its fields.
    #[serde(flatten)]
    pub body: ItemBody,
}

/// The tone of a `notice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum NoticeTone {
    /// Information.
    Info,
    /// A warning.
    Warn,
    /// An error.
    Error,
}

/// The status of a `tool` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolStatus {
    /// Still running.
    Running,
    /// Finished well.
    Ok,
    /// Failed.
    Error,
    /// Not allowed to run.
    Denied,
}

/// The tone of a badge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum BadgeTone {
    /// Neutral.
    Neutral,
    /// Good.
    Good,
    /// Warning.
    Warn,
    /// Bad.
    Bad,
}

/// A small label on a `tool` or `progress` item: text of at most 24 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Badge {
    /// 1 to 24 bytes.
    pub text: String,
    /// The tone.
    pub tone: BadgeTone,
}

impl Badge {
    /// A badge.
    pub fn new(text: impl Into<String>, tone: BadgeTone) -> Self {
        Badge { text: text.into(), tone }
    }
}

/// An item's kind and fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ItemBody {
    /// What the person wrote (64 KiB).
    User {
        /// The text.
        text: String,
        /// The send that produced it.
        #[serde(rename = "requestId", default, skip_serializing_if = "Option::is_none")]
        request_id: Option<Id>,
    },
    /// The agent's reply (256 KiB).
    Reply {
        /// The text.
        text: String,
        /// True while the text grows.
        #[serde(default, skip_serializing_if = "is_false")]
        partial: bool,
    },
    /// Markdown from the agent (256 KiB).
    Markdown {
        /// The text.
        text: String,
        /// True while the text grows.
        #[serde(default, skip_serializing_if = "is_false")]
        partial: bool,
    },
    /// The model's thinking (64 KiB).
    Thinking {
        /// The text.
        text: String,
        /// True while the text grows.
        #[serde(default, skip_serializing_if = "is_false")]
        partial: bool,
    },
    /// A short line from the agent (2 KiB).
    Notice {
        /// The text.
        text: String,
        /// True while the text grows.
        #[serde(default, skip_serializing_if = "is_false")]
        partial: bool,
        /// The tone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tone: Option<NoticeTone>,
    },
    /// Code (256 KiB), with an optional language.
    Code {
        /// The text.
        text: String,
        /// `^[a-z0-9][a-z0-9+#._-]{0,31}$`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lang: Option<String>,
    },
    /// A tool call and its state.
    Tool {
        /// The tool's name (64 B).
        name: String,
        /// The call on one line (512 B).
        call: String,
        /// The status.
        status: ToolStatus,
        /// The output (64 KiB).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// A badge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        badge: Option<Badge>,
    },
    /// A link.
    Link {
        /// The text (1 KiB).
        text: String,
        /// An absolute `https://` or `http://` address, at most 2048 bytes.
        href: String,
    },
    /// Progress of some work.
    Progress {
        /// The label (256 B).
        label: String,
        /// Finite, 0 ≤ value ≤ 1.
        value: f64,
        /// A badge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        badge: Option<Badge>,
    },
}

impl ItemBody {
    /// The wire name of the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ItemBody::User { .. } => "user",
            ItemBody::Reply { .. } => "reply",
            ItemBody::Markdown { .. } => "markdown",
            ItemBody::Thinking { .. } => "thinking",
            ItemBody::Notice { .. } => "notice",
            ItemBody::Code { .. } => "code",
            ItemBody::Tool { .. } => "tool",
            ItemBody::Link { .. } => "link",
            ItemBody::Progress { .. } => "progress",
        }
    }

    /// Whether the item is marked as still growing.
    pub fn is_partial(&self) -> bool {
        match self {
            ItemBody::Reply { partial, .. }
            | ItemBody::Markdown { partial, .. }
            | ItemBody::Thinking { partial, .. }
            | ItemBody::Notice { partial, .. } => *partial,
            _ => false,
        }
    }

    /// Clears `partial` (the item is final). Returns whether it was set.
    pub fn finalize(&mut self) -> bool {
        match self {
            ItemBody::Reply { partial, .. }
            | ItemBody::Markdown { partial, .. }
            | ItemBody::Thinking { partial, .. }
            | ItemBody::Notice { partial, .. } => std::mem::replace(partial, false),
            _ => false,
        }
    }
}

/// Checks a code language: `^[a-z0-9][a-z0-9+#._-]{0,31}$`.
pub fn check_lang(lang: &str) -> Result<(), RuleError> {
    let b = lang.as_bytes();
    let first_ok = b.first().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = b.iter().skip(1).all(|c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'+' | b'#' | b'.' | b'_' | b'-')
    });
    if first_ok && rest_ok && b.len() <= 32 {
        Ok(())
    } else {
        Err(RuleError::invalid(
            "lang",
            format!("lang rule: {lang:?} must match ^[a-z0-9][a-z0-9+#._-]{{0,31}}$"),
        ))
    }
}

/// Checks a link address: absolute `https://` or `http://`, at most 2048 bytes.
pub fn check_href(href: &str) -> Result<(), RuleError> {
    if href.len() > lim::LINK_HREF {
        return Err(RuleError::out_of_range(
            "href",
            format!("href rule: an address is at most {} bytes, this one has {}", lim::LINK_HREF, href.len()),
        ));
    }
    let rest = href.strip_prefix("https://").or_else(|| href.strip_prefix("http://"));
    let host_ok = rest.is_some_and(|r| {
        let host = r.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !host.starts_with('@')
    });
    if !host_ok || href.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(RuleError::invalid(
            "href",
            format!("href rule: {href:?} is not an absolute https:// or http:// address"),
        ));
    }
    Ok(())
}

/// Checks a badge: 1 to 24 bytes of text without control or invisible characters.
pub fn check_badge(badge: &Badge) -> Result<(), RuleError> {
    if badge.text.is_empty() || badge.text.len() > lim::BADGE_TEXT {
        return Err(RuleError::out_of_range(
            "badge",
            format!(
                "badge rule: badge text is 1 to {} bytes, this one has {}",
                lim::BADGE_TEXT,
                badge.text.len()
            ),
        ));
    }
    if clean_line(&badge.text, lim::BADGE_TEXT).changed {
        return Err(RuleError::invalid(
            "badge",
            "badge rule: badge text may hold no control or invisible character",
        ));
    }
    Ok(())
}

/// Checks a progress value: finite, 0 ≤ value ≤ 1.
pub fn check_progress(value: f64) -> Result<(), RuleError> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(RuleError::out_of_range(
            "progress",
            format!("progress rule: {value} is not a finite value from 0 to 1"),
        ))
    }
}

impl Item {
    /// An item with no time.
    pub fn new(id: Id, body: ItemBody) -> Self {
        Item { id, ts: None, body }
    }

    /// A final `reply`; the id follows the ID rule (an `Err` otherwise).
    pub fn reply(id: &str, text: impl Into<String>) -> Result<Item, RuleError> {
        Ok(Item::new(Id::named("item id", id)?, ItemBody::Reply { text: text.into(), partial: false }))
    }

    /// A `reply` still growing (`partial: true`): write the same id again as
    /// it grows, at most every 250 ms, then once with [`Item::reply`].
    pub fn partial_reply(id: &str, text: impl Into<String>) -> Result<Item, RuleError> {
        Ok(Item::new(Id::named("item id", id)?, ItemBody::Reply { text: text.into(), partial: true }))
    }

    /// A `notice` (2 KiB) with a tone.
    pub fn notice(id: &str, text: impl Into<String>, tone: NoticeTone) -> Result<Item, RuleError> {
        Ok(Item::new(
            Id::named("item id", id)?,
            ItemBody::Notice { text: text.into(), partial: false, tone: Some(tone) },
        ))
    }

    /// Applies the item rules: text is sanitized and cut to its kind's limit;
    /// a bad `lang`, `href`, `badge` or `progress` value is an `Err` (Collie
    /// would drop the item). Returns the clean item and whether anything changed.
    pub fn sanitized(mut self) -> Result<(Item, bool), RuleError> {
        let mut changed = false;
        match &mut self.body {
            ItemBody::User { text, .. } => changed |= sanitize_body(text, lim::USER_TEXT),
            ItemBody::Reply { text, .. } | ItemBody::Markdown { text, .. } => {
                changed |= sanitize_body(text, lim::REPLY_TEXT)
            }
            ItemBody::Thinking { text, .. } => changed |= sanitize_body(text, lim::THINKING_TEXT),
            ItemBody::Notice { text, .. } => changed |= sanitize_body(text, lim::NOTICE_TEXT),
            ItemBody::Code { text, lang } => {
                if let Some(lang) = lang {
                    check_lang(lang)?;
                }
                changed |= sanitize_body(text, lim::CODE_TEXT)
            }
            ItemBody::Tool { name, call, output, badge, .. } => {
                if let Some(b) = badge {
                    check_badge(b)?;
                }
                changed |= sanitize_line(name, lim::TOOL_NAME);
                changed |= sanitize_line(call, lim::TOOL_CALL);
                if let Some(out) = output {
                    changed |= sanitize_body(out, lim::TOOL_OUTPUT);
                }
            }
            ItemBody::Link { text, href } => {
                check_href(href)?;
                changed |= sanitize_line(text, lim::LINK_TEXT)
            }
            ItemBody::Progress { label, value, badge } => {
                check_progress(*value)?;
                if let Some(b) = badge {
                    check_badge(b)?;
                }
                changed |= sanitize_line(label, lim::PROGRESS_LABEL)
            }
        }
        Ok((self, changed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    #[test]
    fn bad_lang_is_an_invalid_argument() {
        assert!(check_lang("rust").is_ok());
        assert!(check_lang("c++").is_ok());
        assert!(check_lang("x".repeat(32).as_str()).is_ok());
        for bad in ["", "Rust", "-x", "a b", &"x".repeat(33)] {
            let e = check_lang(bad).unwrap_err();
            assert!(e.is_invalid_argument(), "{bad:?}");
            assert_eq!(e.rule(), "lang");
        }
    }

    #[test]
    fn href_must_be_absolute_http_or_https_within_2048_bytes() {
        assert!(check_href("https://example.com/a?b#c").is_ok());
        assert!(check_href("http://127.0.0.1:8080").is_ok());
        for bad in ["ftp://x", "/relative", "https://", "https:// x", "javascript:alert(1)"] {
            assert_eq!(check_href(bad).unwrap_err().rule(), "href", "{bad:?}");
        }
        let long = format!("https://e.com/{}", "a".repeat(2048));
        assert!(check_href(&long).unwrap_err().is_out_of_range());
    }

    #[test]
    fn progress_value_is_finite_between_zero_and_one() {
        assert!(check_progress(0.0).is_ok());
        assert!(check_progress(1.0).is_ok());
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            assert!(check_progress(bad).unwrap_err().is_out_of_range());
        }
    }

    #[test]
    fn badge_text_is_one_to_24_bytes() {
        assert!(check_badge(&Badge::new("ok", BadgeTone::Good)).is_ok());
        assert_eq!(check_badge(&Badge::new("", BadgeTone::Good)).unwrap_err().rule(), "badge");
        assert_eq!(check_badge(&Badge::new("x".repeat(25), BadgeTone::Good)).unwrap_err().rule(), "badge");
    }

    #[test]
    fn item_text_over_its_limit_is_truncated_per_kind() {
        let item =
            Item::new(id("n"), ItemBody::Notice { text: "é".repeat(2000), partial: false, tone: None });
        let (clean, changed) = item.sanitized().unwrap();
        assert!(changed);
        match clean.body {
            ItemBody::Notice { text, .. } => assert!(text.len() <= 2048 && text.len() > 2040),
            _ => unreachable!(),
        }
    }

    #[test]
    fn item_helpers_check_the_id_rule() {
        assert!(Item::reply("r 1", "x").unwrap_err().is_invalid_argument());
        let partial = Item::partial_reply("r1", "x").unwrap();
        assert!(partial.body.is_partial());
        let notice = Item::notice("n1", "done", NoticeTone::Info).unwrap();
        assert_eq!(notice.body.kind(), "notice");
    }

    #[test]
    fn item_serializes_with_kind_and_omits_absent_fields() {
        let item = Item::new(id("r1"), ItemBody::Reply { text: "hi".into(), partial: false });
        assert_eq!(serde_json::to_string(&item).unwrap(), r#"{"id":"r1","kind":"reply","text":"hi"}"#);
        let item = Item::new(id("r1"), ItemBody::Reply { text: "hi".into(), partial: true });
        assert_eq!(
            serde_json::to_string(&item).unwrap(),
            r#"{"id":"r1","kind":"reply","text":"hi","partial":true}"#
        );
    }
}
