//! Capabilities: what the agent declares it can do (contract §4).

use serde::{Deserialize, Serialize};

/// One capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Cap {
    /// Answer asks (`POST /v1/asks/{askId}`).
    Asks,
    /// Starters (`POST /v1/starters/{starter}`).
    Starters,
    /// Send (`POST /v1/panes/{pane}/send`).
    Send,
    /// Steer (`POST /v1/panes/{pane}/steer`).
    Steer,
    /// Stop (`POST /v1/panes/{pane}/stop`).
    Abort,
    /// Rename (`POST /v1/rename`).
    Rename,
    /// Close (`POST /v1/close`).
    Close,
    /// Pane actions (`POST /v1/panes/{pane}/actions/{action}`).
    Actions,
    /// History (`GET /v1/history…`).
    History,
    /// Reopen (`POST /v1/reopen`).
    Reopen,
    /// A terminal view: always false for a durable agent.
    Terminal,
}

impl Cap {
    /// Every capability, in wire order.
    pub const ALL: [Cap; 11] = [
        Cap::Asks,
        Cap::Starters,
        Cap::Send,
        Cap::Steer,
        Cap::Abort,
        Cap::Rename,
        Cap::Close,
        Cap::Actions,
        Cap::History,
        Cap::Reopen,
        Cap::Terminal,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Cap::Asks => "asks",
            Cap::Starters => "starters",
            Cap::Send => "send",
            Cap::Steer => "steer",
            Cap::Abort => "abort",
            Cap::Rename => "rename",
            Cap::Close => "close",
            Cap::Actions => "actions",
            Cap::History => "history",
            Cap::Reopen => "reopen",
            Cap::Terminal => "terminal",
        }
    }

    /// Parses a wire name.
    pub fn from_name(name: &str) -> Option<Cap> {
        Cap::ALL.into_iter().find(|c| c.name() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// The capability names, in wire order.
pub const CAP_NAMES: [&str; 11] = [
    "asks", "starters", "send", "steer", "abort", "rename", "close", "actions", "history", "reopen",
    "terminal",
];

/// A set of capabilities. `terminal` is never in it.
///
/// `Caps::all().without(Cap::Steer)` is the Rust form of the seed's
/// `{...ALL_CAPS, steer: false}`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Caps(u16);

/// Every capability the SDK can serve (the seed's `ALL_CAPS`): all but
/// `terminal`, `history` included.
pub const ALL_CAPS: Caps = Caps::all();

impl Caps {
    /// Every capability but `terminal`.
    pub const fn all() -> Caps {
        // Bits 0..=9: every cap but Terminal (bit 10).
        Caps(0b011_1111_1111)
    }

    /// No capability.
    pub const fn none() -> Caps {
        Caps(0)
    }

    /// This set plus `cap` (`terminal` is ignored: it is always false).
    pub fn with(self, cap: Cap) -> Caps {
        if cap == Cap::Terminal { self } else { Caps(self.0 | cap.bit()) }
    }

    /// This set without `cap`.
    pub fn without(self, cap: Cap) -> Caps {
        Caps(self.0 & !cap.bit())
    }

    /// Whether `cap` is on.
    pub fn has(self, cap: Cap) -> bool {
        self.0 & cap.bit() != 0
    }

    /// The capabilities that are on, in wire order.
    pub fn iter(self) -> impl Iterator<Item = Cap> {
        Cap::ALL.into_iter().filter(move |c| self.has(*c))
    }

    /// Parses a comma-separated list of names (`"asks,send"`); an unknown
    /// name is an error naming it.
    pub fn parse_list(list: &str) -> Result<Caps, crate::RuleError> {
        let mut caps = Caps::none();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let cap = Cap::from_name(name).ok_or_else(|| {
                crate::RuleError::invalid(
                    "caps",
                    format!("caps: unknown capability {name:?} (known: {})", CAP_NAMES.join(", ")),
                )
            })?;
            caps = caps.with(cap);
        }
        Ok(caps)
    }
}

impl FromIterator<Cap> for Caps {
    fn from_iter<I: IntoIterator<Item = Cap>>(iter: I) -> Caps {
        iter.into_iter().fold(Caps::none(), Caps::with)
    }
}

impl std::fmt::Debug for Caps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter().map(Cap::name)).finish()
    }
}

/// The `caps` object of `GET /hello`: every name, `true` or `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // one field per capability, named as on the wire
pub struct CapsView {
    pub asks: bool,
    pub starters: bool,
    pub send: bool,
    pub steer: bool,
    pub abort: bool,
    pub rename: bool,
    pub close: bool,
    pub actions: bool,
    pub history: bool,
    pub reopen: bool,
    pub terminal: bool,
}

impl From<Caps> for CapsView {
    fn from(c: Caps) -> CapsView {
        CapsView {
            asks: c.has(Cap::Asks),
            starters: c.has(Cap::Starters),
            send: c.has(Cap::Send),
            steer: c.has(Cap::Steer),
            abort: c.has(Cap::Abort),
            rename: c.has(Cap::Rename),
            close: c.has(Cap::Close),
            actions: c.has(Cap::Actions),
            history: c.has(Cap::History),
            reopen: c.has(Cap::Reopen),
            terminal: false,
        }
    }
}

impl From<CapsView> for Caps {
    fn from(v: CapsView) -> Caps {
        let pairs = [
            (v.asks, Cap::Asks),
            (v.starters, Cap::Starters),
            (v.send, Cap::Send),
            (v.steer, Cap::Steer),
            (v.abort, Cap::Abort),
            (v.rename, Cap::Rename),
            (v.close, Cap::Close),
            (v.actions, Cap::Actions),
            (v.history, Cap::History),
            (v.reopen, Cap::Reopen),
        ];
        pairs.into_iter().filter(|(on, _)| *on).map(|(_, c)| c).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_caps_without_one_is_one_line() {
        let caps = Caps::all().without(Cap::Steer);
        assert!(!caps.has(Cap::Steer));
        assert!(caps.has(Cap::Send));
        assert!(!caps.has(Cap::Terminal));
    }

    #[test]
    fn caps_rule_all_is_every_cap_but_terminal() {
        for cap in Cap::ALL {
            assert_eq!(Caps::all().has(cap), cap != Cap::Terminal, "{}", cap.name());
        }
        assert_eq!(ALL_CAPS.iter().count(), Cap::ALL.len() - 1);
        assert!(CapsView::from(Caps::all()).reopen);
        assert_eq!(Caps::all(), Cap::ALL.into_iter().collect::<Caps>());
    }

    #[test]
    fn terminal_is_always_false() {
        assert!(!Caps::all().with(Cap::Terminal).has(Cap::Terminal));
        assert!(!CapsView::from(Caps::all()).terminal);
    }

    #[test]
    fn cap_names_match_wire_order() {
        let names: Vec<_> = Cap::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, CAP_NAMES);
    }
}
