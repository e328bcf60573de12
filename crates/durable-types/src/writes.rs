//! Writes from the phone: request bodies and the success answer (§8).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields;
use crate::text::{check_title, clean_line, quoted};
use crate::{Id, PHONE_TEXT_MAX, TITLE_MAX};

/// What a rename or close acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Target {
    /// A workspace.
    Workspace,
    /// A tab (wire id `<workspace>:<tab>`).
    Tab,
    /// A pane.
    Pane,
}

impl Target {
    /// Checks a target id by the ID rule of its kind: a workspace id (no
    /// `:`), a tab's `<workspace>:<tab>`, or a pane id.
    pub fn check_id(self, id: &str) -> Result<(), String> {
        let checked = match self {
            Target::Workspace => crate::check_scope_id_for("workspace id", id),
            Target::Tab => match id.split_once(':') {
                Some((w, t)) => crate::check_scope_id_for("workspace id of a tab", w)
                    .and_then(|()| crate::check_scope_id_for("tab id", t)),
                None => {
                    return Err(format!("id: tab id {}: a tab id is <workspace>:<tab>", quoted(id)));
                }
            },
            Target::Pane => crate::check_id_for("pane id", id),
        };
        checked.map_err(|e| format!("id: {e}"))
    }

    /// The target's wire name.
    fn name(self) -> &'static str {
        match self {
            Target::Workspace => "workspace",
            Target::Tab => "tab",
            Target::Pane => "pane",
        }
    }

    fn parse(s: &str) -> Result<Target, String> {
        match s {
            "workspace" => Ok(Target::Workspace),
            "tab" => Ok(Target::Tab),
            "pane" => Ok(Target::Pane),
            _ => Err("target must be workspace, tab or pane".into()),
        }
    }
}

fn phone_text(s: String) -> Result<String, String> {
    if s.len() > PHONE_TEXT_MAX {
        Err(format!(
            "text is {} bytes, over the {PHONE_TEXT_MAX}-byte limit (never cut: it would lose what the person wrote)",
            s.len()
        ))
    } else {
        Ok(s)
    }
}

/// A parsed write body, of any route. Each `parse` applies the route's body
/// rules and answers an error sentence for `400 bad-request`; a server that
/// knows the route parses its typed body ([`SendBody`], [`SteerBody`], …).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteBody {
    /// `send`: `text` (64 KiB), `turnId?`.
    Send {
        /// The request id.
        request_id: Id,
        /// The text.
        text: String,
        /// The turn the phone saw: absent (no check), `null` (no turn yet)
        /// or a turn id.
        turn_id: Option<Option<String>>,
    },
    /// `steer`: `text`.
    Steer {
        /// The request id.
        request_id: Id,
        /// The text.
        text: String,
    },
    /// `stop` and `actions/{action}`: only the request id.
    Plain {
        /// The request id.
        request_id: Id,
    },
    /// `rename`: `target`, `id`, `title`.
    Rename {
        /// The request id.
        request_id: Id,
        /// What is renamed.
        target: Target,
        /// Its id (a tab's wire id for a tab).
        id: String,
        /// The new title.
        title: String,
    },
    /// `close`: `target`, `id`.
    Close {
        /// The request id.
        request_id: Id,
        /// What is closed.
        target: Target,
        /// Its id.
        id: String,
    },
    /// `reopen`: `id` (a pane).
    Reopen {
        /// The request id.
        request_id: Id,
        /// The pane id.
        id: Id,
    },
    /// `starters/{starter}`: `text?`.
    Starter {
        /// The request id.
        request_id: Id,
        /// The first text, if any.
        text: Option<String>,
    },
}

impl WriteBody {
    /// The request id.
    pub fn request_id(&self) -> &Id {
        match self {
            WriteBody::Send { request_id, .. }
            | WriteBody::Steer { request_id, .. }
            | WriteBody::Plain { request_id }
            | WriteBody::Rename { request_id, .. }
            | WriteBody::Close { request_id, .. }
            | WriteBody::Reopen { request_id, .. }
            | WriteBody::Starter { request_id, .. } => request_id,
        }
    }

    /// Parses a send body.
    pub fn parse_send(body: &[u8]) -> Result<WriteBody, String> {
        SendBody::parse(body).map(Into::into)
    }

    /// Parses a steer body.
    pub fn parse_steer(body: &[u8]) -> Result<WriteBody, String> {
        SteerBody::parse(body).map(Into::into)
    }

    /// Parses a stop or action body.
    pub fn parse_plain(body: &[u8]) -> Result<WriteBody, String> {
        PlainBody::parse(body).map(Into::into)
    }

    /// Parses a rename body.
    pub fn parse_rename(body: &[u8]) -> Result<WriteBody, String> {
        RenameBody::parse(body).map(Into::into)
    }

    /// Parses a close body.
    pub fn parse_close(body: &[u8]) -> Result<WriteBody, String> {
        CloseBody::parse(body).map(Into::into)
    }

    /// Parses a reopen body.
    pub fn parse_reopen(body: &[u8]) -> Result<WriteBody, String> {
        ReopenBody::parse(body).map(Into::into)
    }

    /// Parses a starter body.
    pub fn parse_starter(body: &[u8]) -> Result<WriteBody, String> {
        StarterBody::parse(body).map(Into::into)
    }
}

/// `send`: `text` (64 KiB), `turnId?`. The route's typed body: the
/// [`WriteBody`] variant of the same name holds the same fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendBody {
    /// The request id.
    pub request_id: Id,
    /// The text.
    pub text: String,
    /// The turn the phone saw: absent (no check), `null` (no turn yet) or a
    /// turn id.
    pub turn_id: Option<Option<String>>,
}

impl SendBody {
    /// Parses a send body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<SendBody, String> {
        let o = fields::object(body)?;
        Ok(SendBody {
            request_id: fields::request_id(&o)?,
            text: phone_text(fields::string(&o, "text")?)?,
            turn_id: fields::nullable_string(&o, "turnId")?,
        })
    }
}

/// `steer`: `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SteerBody {
    /// The request id.
    pub request_id: Id,
    /// The text.
    pub text: String,
}

impl SteerBody {
    /// Parses a steer body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<SteerBody, String> {
        let o = fields::object(body)?;
        Ok(SteerBody { request_id: fields::request_id(&o)?, text: phone_text(fields::string(&o, "text")?)? })
    }
}

/// `stop` and `actions/{action}`: only the request id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlainBody {
    /// The request id.
    pub request_id: Id,
}

impl PlainBody {
    /// Parses a stop or action body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<PlainBody, String> {
        let o = fields::object(body)?;
        Ok(PlainBody { request_id: fields::request_id(&o)? })
    }
}

/// `rename`: `target`, `id`, `title`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenameBody {
    /// The request id.
    pub request_id: Id,
    /// What is renamed.
    pub target: Target,
    /// Its id (a tab's wire id for a tab).
    pub id: String,
    /// The new title, as sent; [`parse`](Self::parse) refuses one that is
    /// empty once cleaned ([`crate::text::clean_title`]).
    pub title: String,
}

impl RenameBody {
    /// Parses a rename body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<RenameBody, String> {
        let o = fields::object(body)?;
        let request_id = fields::request_id(&o)?;
        let target = Target::parse(&fields::string(&o, "target")?)?;
        let id = fields::string(&o, "id")?;
        target.check_id(&id)?;
        let title = fields::string(&o, "title")?;
        // The title rule, as for the program's renames: a title that shows
        // nothing once cleaned is refused here (400), before the receipt.
        check_title(
            &clean_line(&title, TITLE_MAX).text,
            "title",
            &format!("{} {}", target.name(), quoted(&id)),
        )
        .map_err(|e| format!("title: {e}"))?;
        Ok(RenameBody { request_id, target, id, title })
    }
}

/// `close`: `target`, `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseBody {
    /// The request id.
    pub request_id: Id,
    /// What is closed.
    pub target: Target,
    /// Its id.
    pub id: String,
}

impl CloseBody {
    /// Parses a close body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<CloseBody, String> {
        let o = fields::object(body)?;
        let request_id = fields::request_id(&o)?;
        let target = Target::parse(&fields::string(&o, "target")?)?;
        let id = fields::string(&o, "id")?;
        target.check_id(&id)?;
        Ok(CloseBody { request_id, target, id })
    }
}

/// `reopen`: `id` (a pane).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReopenBody {
    /// The request id.
    pub request_id: Id,
    /// The pane id.
    pub id: Id,
}

impl ReopenBody {
    /// Parses a reopen body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<ReopenBody, String> {
        let o = fields::object(body)?;
        Ok(ReopenBody { request_id: fields::request_id(&o)?, id: fields::id(&o, "id")? })
    }
}

/// `starters/{starter}`: `text?`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StarterBody {
    /// The request id.
    pub request_id: Id,
    /// The first text, if any.
    pub text: Option<String>,
}

impl StarterBody {
    /// Parses a starter body; the error is a sentence for `400 bad-request`.
    pub fn parse(body: &[u8]) -> Result<StarterBody, String> {
        let o = fields::object(body)?;
        Ok(StarterBody {
            request_id: fields::request_id(&o)?,
            text: fields::opt_string(&o, "text")?.map(phone_text).transpose()?,
        })
    }
}

/// Each typed body is the [`WriteBody`] variant of the same name.
macro_rules! into_write_body {
    ($($body:ident => $variant:ident { $($field:ident),* };)*) => {$(
        impl From<$body> for WriteBody {
            fn from(b: $body) -> WriteBody {
                WriteBody::$variant { $($field: b.$field),* }
            }
        }
    )*};
}

into_write_body! {
    SendBody => Send { request_id, text, turn_id };
    SteerBody => Steer { request_id, text };
    PlainBody => Plain { request_id };
    RenameBody => Rename { request_id, target, id, title };
    CloseBody => Close { request_id, target, id };
    ReopenBody => Reopen { request_id, id };
    StarterBody => Starter { request_id, text };
}

/// The success answer of a write: `ok`, `result`, `requestId`, `replayed`,
/// and the route's own fields (`turnId`, `pane`, `askId`, `decidedBy`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResponse {
    /// Always true.
    pub ok: bool,
    /// `sent`, `queued`, `steered`, `stopped`, `done`, `renamed`, `closed`,
    /// `reopened`, `started`, `answered` or `held`.
    pub result: String,
    /// The route's own fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The request id.
    pub request_id: Id,
    /// True when this is the stored answer to an earlier request.
    pub replayed: bool,
}

impl WriteResponse {
    /// A fresh success answer.
    pub fn new(result: &str, request_id: Id) -> Self {
        WriteResponse { ok: true, result: result.to_owned(), extra: Map::new(), request_id, replayed: false }
    }

    /// Adds a route field.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_and_close_ids_follow_the_id_rule_of_their_target() {
        let body =
            |t: &str, id: &str| format!(r#"{{"requestId":"r","target":"{t}","id":"{id}","title":"x"}}"#);
        assert!(WriteBody::parse_rename(body("pane", "ticket-1").as_bytes()).is_ok());
        assert!(WriteBody::parse_rename(body("tab", "support:main").as_bytes()).is_ok());
        assert!(WriteBody::parse_rename(body("pane", "a/b").as_bytes()).is_err());
        assert!(WriteBody::parse_rename(body("workspace", "a:b").as_bytes()).is_err());
        assert!(WriteBody::parse_close(body("tab", "main").as_bytes()).is_err());
        assert!(WriteBody::parse_close(body("tab", "a:b:c").as_bytes()).is_err());
    }

    #[test]
    fn a_typed_body_is_the_write_body_of_its_route() {
        let body = br#"{"requestId":"r","text":"hi","turnId":null}"#;
        let typed = SendBody::parse(body).unwrap();
        assert_eq!(typed.turn_id, Some(None));
        assert_eq!(WriteBody::from(typed), WriteBody::parse_send(body).unwrap());
        assert_eq!(StarterBody::parse(b"{}").unwrap_err(), WriteBody::parse_starter(b"{}").unwrap_err());
    }

    #[test]
    fn phone_text_over_64_kib_is_refused_never_cut() {
        let text = "x".repeat(PHONE_TEXT_MAX + 1);
        let body = format!(r#"{{"requestId":"r","text":"{text}"}}"#);
        assert!(WriteBody::parse_send(body.as_bytes()).is_err());
        let ok = format!(r#"{{"requestId":"r","text":"{}"}}"#, "x".repeat(PHONE_TEXT_MAX));
        assert!(WriteBody::parse_send(ok.as_bytes()).is_ok());
    }
}
