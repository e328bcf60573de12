//! The ID rule and the cursor rule, as validated newtypes.
//!
//! ID rule (contract §2): 1 to [`ID_MAX`] bytes, no control character, no white
//! space, none of `/`, `?`, `#`. Workspace and tab ids ([`ScopeId`]) also
//! exclude `:`, because on the wire a tab is named `<workspace>:<tab>`.
//! Cursor rule: 1 to [`CURSOR_MAX`] bytes of printable ASCII without space.

use std::borrow::Borrow;
use std::fmt;

use percent_encoding::percent_decode_str;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text::quoted;
use crate::{CURSOR_MAX, ID_MAX, RuleError};

/// Checks a string against the ID rule; the error names what broke it and
/// shows the value (escaped and cut, [`quoted`]), calling it an `id`:
/// `id "a/b": id rule: an id may not contain '/' …`.
pub fn check_id(s: &str) -> Result<(), RuleError> {
    check_id_for("id", s)
}

/// [`check_id`] for an id of a known role (`"pane id"`, `"action id"`,
/// `"ask id"`, …): the error starts with the role and the value, e.g.
/// `pane id "a/b": id rule: an id may not contain '/' …`.
pub fn check_id_for(role: &str, s: &str) -> Result<(), RuleError> {
    id_rule(s).map_err(|why| RuleError::invalid("id", format!("{role} {}: id rule: {why}", quoted(s))))
}

/// Why `s` breaks the ID rule, if it does.
fn id_rule(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("an id must not be empty".to_owned());
    }
    if s.len() > ID_MAX {
        return Err(format!("an id is at most {ID_MAX} bytes, this one has {}", s.len()));
    }
    if let Some(c) = s.chars().find(|c| c.is_control() || c.is_whitespace() || matches!(c, '/' | '?' | '#')) {
        let what = if c.is_control() {
            "a control character".to_owned()
        } else if c.is_whitespace() {
            "white space".to_owned()
        } else {
            format!("'{c}'")
        };
        return Err(format!(
            "an id may not contain {what} (no control character, white space, '/', '?' or '#')"
        ));
    }
    Ok(())
}

/// Checks a workspace or tab id: the ID rule, and no `:`. The error calls
/// it a `workspace or tab id`.
pub fn check_scope_id(s: &str) -> Result<(), RuleError> {
    check_scope_id_for("workspace or tab id", s)
}

/// [`check_scope_id`] for an id of a known role (`"workspace id"`,
/// `"tab id"`); the error starts with the role and the value.
pub fn check_scope_id_for(role: &str, s: &str) -> Result<(), RuleError> {
    check_id_for(role, s)?;
    if s.contains(':') {
        return Err(RuleError::invalid(
            "id",
            format!(
                "{role} {}: id rule: a workspace or tab id may not contain ':' (a tab is named <workspace>:<tab> on the wire)",
                quoted(s)
            ),
        ));
    }
    Ok(())
}

/// Checks a string against the cursor rule. The error calls it a
/// `cursor`.
pub fn check_cursor(s: &str) -> Result<(), RuleError> {
    check_cursor_for("cursor", s)
}

/// [`check_cursor`] naming the cursor's role (e.g. `"after"`); the error
/// starts with the role and the value.
pub fn check_cursor_for(role: &str, s: &str) -> Result<(), RuleError> {
    let why = if s.is_empty() || s.len() > CURSOR_MAX {
        format!("a cursor is 1 to {CURSOR_MAX} bytes, this one has {}", s.len())
    } else if !s.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        "a cursor is printable ASCII without space".to_owned()
    } else {
        return Ok(());
    };
    Err(RuleError::invalid("cursor", format!("{role} {}: cursor rule: {why}", quoted(s))))
}

/// Percent-decodes one URL path segment. Fails when the bytes are not UTF-8.
pub fn decode_path_segment(segment: &str) -> Result<String, RuleError> {
    // A `%` must start an escape of two hex digits: `a%` or `a%zz` is not a
    // literal percent sign but a malformed segment.
    let b = segment.as_bytes();
    let malformed = b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        return Err(RuleError::invalid(
            "id",
            format!("path segment {}: id rule: a `%` here starts no escape (%XX)", quoted(segment)),
        ));
    }
    percent_decode_str(segment).decode_utf8().map(|s| s.into_owned()).map_err(|_| {
        RuleError::invalid(
            "id",
            format!("path segment {}: id rule: a path segment must decode to UTF-8", quoted(segment)),
        )
    })
}

macro_rules! string_newtype {
    ($(#[$meta:meta])* $name:ident, $check:path, $check_for:path) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps a string.
            pub fn new(s: impl Into<String>) -> Result<Self, RuleError> {
                let s = s.into();
                $check(&s)?;
                Ok(Self(s))
            }

            /// Validates and wraps a string meant as `role` (e.g. `"pane
            /// id"`): an error starts with the role and the value, escaped
            /// and cut to 64 bytes.
            pub fn named(role: &str, s: impl Into<String>) -> Result<Self, RuleError> {
                let s = s.into();
                $check_for(role, &s)?;
                Ok(Self(s))
            }

            /// Percent-decodes a URL path segment, then validates it.
            pub fn from_path_segment(segment: &str) -> Result<Self, RuleError> {
                Self::new(decode_path_segment(segment)?)
            }

            /// The string.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = RuleError;
            fn try_from(s: String) -> Result<Self, RuleError> {
                Self::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = RuleError;
            fn try_from(s: &str) -> Result<Self, RuleError> {
                Self::new(s)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_newtype!(
    /// An id that follows the ID rule: pane, item, ask, action, starter,
    /// request and session ids.
    Id,
    check_id,
    check_id_for
);

string_newtype!(
    /// A workspace or tab id: the ID rule, and no `:`.
    ScopeId,
    check_scope_id,
    check_scope_id_for
);

string_newtype!(
    /// A history cursor: 1 to 512 bytes of printable ASCII without space.
    Cursor,
    check_cursor,
    check_cursor_for
);

impl From<ScopeId> for Id {
    fn from(s: ScopeId) -> Id {
        Id(s.0)
    }
}

/// The wire name of a tab: `<workspace>:<tab>`.
pub fn tab_wire_id(workspace: &ScopeId, tab: &ScopeId) -> String {
    format!("{workspace}:{tab}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_rule_accepts_one_to_128_bytes() {
        assert!(Id::new("a").is_ok());
        assert!(Id::new("x".repeat(128)).is_ok());
        assert!(Id::new("x".repeat(129)).is_err());
        assert!(Id::new("").is_err());
    }

    #[test]
    fn id_rule_refuses_slash_question_hash_space_control() {
        for bad in ["a/b", "a?b", "a#b", "a b", "a\tb", "a\u{7f}", "a\u{a0}b", "\u{2028}"] {
            let e = Id::new(bad).unwrap_err();
            assert!(e.is_invalid_argument(), "{bad:?}");
            assert_eq!(e.rule(), "id");
        }
        assert!(Id::new("ticket-1:x.y_z").is_ok());
        assert!(Id::new("é").is_ok());
    }

    #[test]
    fn scope_id_rule_refuses_colon() {
        assert!(ScopeId::new("support").is_ok());
        assert!(ScopeId::new("support:main").is_err());
    }

    #[test]
    fn id_rule_applies_after_percent_decoding() {
        assert_eq!(Id::from_path_segment("ticket%2D1").unwrap(), "ticket-1");
        assert!(Id::from_path_segment("a%2Fb").is_err());
        assert!(Id::from_path_segment("a%20b").is_err());
        assert!(Id::from_path_segment("%FF").is_err());
        assert!(Id::from_path_segment("a%").is_err());
        assert!(Id::from_path_segment("a%zz").is_err());
        assert!(Id::from_path_segment("a%2").is_err());
        assert_eq!(Id::from_path_segment("100%25").unwrap(), "100%");
    }

    #[test]
    fn cursor_rule_is_printable_ascii_without_space() {
        assert!(Cursor::new("abc~!").is_ok());
        assert!(Cursor::new("").is_err());
        assert!(Cursor::new("a b").is_err());
        assert!(Cursor::new("é").is_err());
        assert!(Cursor::new("x".repeat(512)).is_ok());
        assert!(Cursor::new("x".repeat(513)).is_err());
    }
}
