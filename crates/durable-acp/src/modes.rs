//! Which session mode a session the bridge starts or loads runs in: cards
//! by default. Some agents start their sessions in a mode in which they
//! never ask before they act (Claude Code's `auto`, Codex's `full-access`,
//! Gemini CLI's `yolo`): a phone that never sees a card is not the phone
//! the user installed. Unless the user chose a mode, such a session is
//! switched (`session/set_mode`) to one in which the agent asks.

use agent_client_protocol::v1::schema::SessionModeState;

/// Session modes in which an agent acts without asking: allow-always by
/// another name.
pub(crate) const NEVER_ASKS: [&str; 5] = ["auto", "bypassPermissions", "full-access", "yolo", "dontAsk"];

/// Modes in which an agent asks, by name, preferred in this order.
const ASKS: [&str; 3] = ["default", "ask", "manual"];

/// A mode that plans and does nothing: never chosen on the user's behalf.
const PLAN: &str = "plan";

/// What mode a session runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum ModeChoice {
    /// One in which the agent asks before it acts: the agent's own, unless
    /// that one never asks (then the first of [`ASKS`] it offers, else the
    /// first it offers that neither never asks nor only plans).
    #[default]
    AsksFirst,
    /// This mode, the user's choice (`--mode`), when the agent offers it.
    Chosen(String),
}

/// The mode to switch the session to, or `None` to leave it as it is;
/// `Err` when the user's mode is not one the agent offers (the message
/// names it and the modes offered).
pub(crate) fn mode_to_select(
    state: &SessionModeState,
    choice: &ModeChoice,
) -> Result<Option<String>, String> {
    let current = &*state.current_mode_id.0;
    let offered: Vec<&str> = state.available_modes.iter().map(|m| &*m.id.0).collect();
    match choice {
        ModeChoice::Chosen(mode) if mode == current => Ok(None),
        ModeChoice::Chosen(mode) if offered.contains(&mode.as_str()) => Ok(Some(mode.clone())),
        ModeChoice::Chosen(mode) => {
            Err(format!("the agent offers no mode {mode:?} (it offers {})", offered.join(", ")))
        }
        ModeChoice::AsksFirst if !NEVER_ASKS.contains(&current) => Ok(None),
        ModeChoice::AsksFirst => {
            let by_name = ASKS.iter().copied().find(|m| offered.contains(m));
            let other = || offered.iter().copied().find(|m| !NEVER_ASKS.contains(m) && *m != PLAN);
            Ok(by_name.or_else(other).map(str::to_owned))
        }
    }
}

/// The prefix of the pane buttons that change the session's mode.
const BUTTON_PREFIX: &str = "mode-";

/// The pane buttons of the session's modes: `(action id, label)`, the
/// current one marked; a mode that never asks only where allow-always is
/// on (it is allow-always by another name: never over HTTPS), and a mode
/// whose id cannot be an action id left out.
pub(crate) fn buttons(state: &SessionModeState, allow_always: bool) -> Vec<(String, String)> {
    state
        .available_modes
        .iter()
        .filter(|m| allow_always || !NEVER_ASKS.contains(&&*m.id.0))
        .filter_map(|m| {
            let id = format!("{BUTTON_PREFIX}{}", m.id.0);
            durable_types::check_id(&id).ok()?;
            let name = if m.name.trim().is_empty() { &*m.id.0 } else { m.name.trim() };
            let name: String = name.chars().take(40).collect();
            let label = if m.id == state.current_mode_id {
                format!("Mode: {name} (now)")
            } else {
                format!("Mode: {name}")
            };
            Some((id, label))
        })
        .collect()
}

/// The mode a pane button asks for (`mode-<id>`).
pub(crate) fn mode_of_button(action: &str) -> Option<&str> {
    action.strip_prefix(BUTTON_PREFIX).filter(|m| !m.is_empty())
}

/// A mode's name, as its agent gives it (its id when it gives none).
pub(crate) fn name_of<'a>(state: &'a SessionModeState, mode: &'a str) -> &'a str {
    state
        .available_modes
        .iter()
        .find(|m| &*m.id.0 == mode)
        .map(|m| m.name.trim())
        .filter(|n| !n.is_empty())
        .unwrap_or(mode)
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::SessionMode;

    use super::*;

    fn state(current: &str, offered: &[&str]) -> SessionModeState {
        SessionModeState::new(
            current.to_owned(),
            offered.iter().map(|m| SessionMode::new(m.to_string(), *m)).collect(),
        )
    }

    #[test]
    fn a_session_that_would_never_ask_is_switched_to_one_that_asks() {
        let claude = state("auto", &["default", "acceptEdits", "plan", "auto"]);
        assert_eq!(mode_to_select(&claude, &ModeChoice::AsksFirst), Ok(Some("default".into())));
        let codex = state("full-access", &["read-only", "auto", "full-access"]);
        assert_eq!(mode_to_select(&codex, &ModeChoice::AsksFirst), Ok(Some("read-only".into())));
        let gemini = state("yolo", &["plan", "yolo", "autoEdit"]);
        assert_eq!(mode_to_select(&gemini, &ModeChoice::AsksFirst), Ok(Some("autoEdit".into())));
        // Nothing but modes that never ask (or only plan): left as it is.
        assert_eq!(mode_to_select(&state("yolo", &["yolo", "plan"]), &ModeChoice::AsksFirst), Ok(None));
    }

    #[test]
    fn a_session_that_asks_already_is_left_as_it_is() {
        let gemini = state("default", &["default", "autoEdit", "yolo", "plan"]);
        assert_eq!(mode_to_select(&gemini, &ModeChoice::AsksFirst), Ok(None));
        // pi-acp's modes are thinking levels: none of them never asks.
        let pi = state("medium", &["off", "low", "medium", "high"]);
        assert_eq!(mode_to_select(&pi, &ModeChoice::AsksFirst), Ok(None));
    }

    #[test]
    fn the_users_mode_wins_and_one_not_offered_is_named() {
        let claude = state("default", &["default", "acceptEdits", "plan", "auto"]);
        let auto = ModeChoice::Chosen("auto".into());
        assert_eq!(mode_to_select(&claude, &auto), Ok(Some("auto".into())));
        assert_eq!(mode_to_select(&state("auto", &["default", "auto"]), &auto), Ok(None));
        let err = mode_to_select(&claude, &ModeChoice::Chosen("yolo".into())).unwrap_err();
        assert!(err.contains("\"yolo\"") && err.contains("default, acceptEdits, plan, auto"), "{err}");
    }

    #[test]
    fn the_buttons_mark_the_current_mode_and_offer_a_mode_that_never_asks_only_with_allow_always() {
        let claude = state("default", &["default", "acceptEdits", "plan", "auto"]);
        let ids = |b: Vec<(String, String)>| {
            b.into_iter().map(|(id, label)| format!("{id}={label}")).collect::<Vec<_>>()
        };
        assert_eq!(
            ids(buttons(&claude, true)),
            [
                "mode-default=Mode: default (now)",
                "mode-acceptEdits=Mode: acceptEdits",
                "mode-plan=Mode: plan",
                "mode-auto=Mode: auto"
            ]
        );
        assert!(
            !ids(buttons(&claude, false)).iter().any(|b| b.starts_with("mode-auto")),
            "no auto over HTTPS"
        );
        assert_eq!(mode_of_button("mode-acceptEdits"), Some("acceptEdits"));
        assert_eq!((mode_of_button("mode-"), mode_of_button("refund")), (None, None));
        // An id the ID rule refuses is no button.
        assert!(buttons(&state("a b", &["a b"]), true).is_empty());
        assert_eq!(name_of(&claude, "auto"), "auto");
    }
}
