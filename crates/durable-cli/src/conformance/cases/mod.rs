//! The cases, each named after the rule it checks, in the order they run, and
//! the context a case gets: the transport, the shared desk, or desks of its own.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use super::Suite;
use super::check::R;
use super::client::Client;
use super::desk::{Desk, DeskSpec, Output, Transport};

mod answers;
mod asks;
mod events;
mod hello;
mod history;
mod knobs;
mod malformed;
mod receipts;
mod socket;
mod state;
mod tokens;
mod writes;

pub(crate) type CaseFuture = Pin<Box<dyn Future<Output = R>>>;

/// Which transports a case runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum On {
    Both,
    Socket,
    Tls,
}

/// A case runs on the shared desk of its transport, or starts its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Uses {
    Shared,
    Own,
}

pub(crate) struct Case {
    pub(crate) rule: &'static str,
    pub(crate) on: On,
    pub(crate) uses: Uses,
    pub(crate) run: fn(Ctx) -> CaseFuture,
}

impl Case {
    pub(crate) fn runs_on(&self, t: Transport) -> bool {
        matches!((self.on, t), (On::Both, _) | (On::Socket, Transport::Socket) | (On::Tls, Transport::Tls))
    }

    /// `<rule> [socket]` / `<rule> [tls]`.
    pub(crate) fn name(&self, t: Transport) -> String {
        format!("{} [{}]", self.rule, t.name())
    }
}

/// What a case sees.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) suite: Arc<Suite>,
    pub(crate) shared: Option<Shared>,
}

/// The shared desk of a transport, as cases see it.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) socket: PathBuf,
}

impl Ctx {
    pub(crate) fn transport(&self) -> Transport {
        self.suite.transport
    }

    pub(crate) fn client(&self) -> R<Client> {
        self.shared
            .as_ref()
            .map(|s| s.client.clone())
            .ok_or_else(|| "no shared desk for this case".to_owned())
    }

    pub(crate) fn shared_stderr(&self) -> R<Output> {
        self.shared.as_ref().map(|s| s.stderr.clone()).ok_or_else(|| "no shared desk".to_owned())
    }

    pub(crate) fn shared_output(&self) -> R<(String, String)> {
        self.shared
            .as_ref()
            .map(|s| (s.stdout.text(), s.stderr.text()))
            .ok_or_else(|| "no shared desk".to_owned())
    }

    pub(crate) fn shared_socket(&self) -> R<PathBuf> {
        self.shared.as_ref().map(|s| s.socket.clone()).ok_or_else(|| "no shared desk".to_owned())
    }

    /// A fresh data folder (and socket path) with these knobs.
    pub(crate) fn spec(&self, knobs: &[&str]) -> DeskSpec {
        self.suite.spec(knobs)
    }

    /// A desk of the case's own, fresh data folder.
    pub(crate) async fn desk(&self, knobs: &[&str]) -> R<Desk> {
        Desk::start(self.spec(knobs)).await
    }

    pub(crate) fn token(&self) -> &str {
        &self.suite.token
    }

    pub(crate) fn token_next(&self) -> &str {
        &self.suite.token_next
    }
}

macro_rules! case {
    ($on:ident, $uses:ident, $module:ident :: $rule:ident) => {
        Case {
            rule: stringify!($rule),
            on: On::$on,
            uses: Uses::$uses,
            run: |cx| Box::pin($module::$rule(cx)),
        }
    };
}

/// Every case, in running order: shared-desk cases first, each group by concern,
/// then the cases with desks of their own.
pub(crate) fn all() -> Vec<Case> {
    vec![
        case!(Both, Shared, hello::hello_says_wire_1_and_caps),
        case!(Both, Shared, hello::hello_epoch_is_in_every_state_answer),
        case!(Both, Shared, hello::hello_post_compatible_when_ranges_overlap),
        case!(Both, Shared, hello::hello_post_incompatible_warns_once_per_collie_version),
        case!(Both, Shared, malformed::responses_are_json_objects_with_ok),
        case!(Both, Shared, state::state_full_has_every_field),
        case!(Both, Shared, state::state_etag_is_epoch_dash_seq),
        case!(Both, Shared, state::state_304_when_etag_matches),
        case!(Both, Shared, state::state_since_send_changes_only_that_pane),
        case!(Both, Shared, state::state_since_layout_change_brings_layout_fields),
        case!(Both, Shared, state::state_full_when_since_is_zero_or_ahead),
        case!(Both, Shared, events::events_after_lists_events_and_next),
        case!(Both, Shared, events::events_next_is_after_when_none_returned),
        case!(Both, Shared, events::events_after_beyond_last_gives_snapshot),
        case!(Both, Shared, events::events_unknown_pane_404),
        case!(Both, Shared, writes::starter_new_ticket_started_with_next_pane),
        case!(Both, Shared, asks::ask_choice_end_to_end),
        case!(Both, Shared, asks::ask_multi_end_to_end),
        case!(Both, Shared, asks::ask_text_end_to_end),
        case!(Both, Shared, asks::ask_form_end_to_end),
        case!(Both, Shared, asks::ask_approve_end_to_end),
        case!(Both, Shared, asks::ask_expiry_closes_with_timeout_and_one_notice),
        case!(Both, Shared, asks::answer_hash_mismatch_409_with_current_ask),
        case!(Both, Shared, asks::answer_single_use_second_request_id_409_ask_closed),
        case!(Both, Shared, answers::answer_malformed_body_400_before_anything_else),
        case!(Both, Shared, answers::answer_unknown_ask_with_hash_202_held),
        case!(Both, Shared, answers::answer_unknown_ask_without_hash_404),
        case!(Both, Shared, answers::answer_decided_ask_is_ask_closed_before_hash_check),
        case!(Both, Shared, answers::answer_stale_hash_checked_before_fit),
        case!(Both, Shared, answers::answer_misfit_400_stores_nothing_then_same_id_succeeds),
        case!(Both, Shared, answers::answer_misfit_multi_and_form_400),
        case!(Both, Shared, answers::answer_confirm_always_for_allow_always),
        case!(Both, Shared, answers::answer_receipt_replayed_before_ask_checks),
        case!(Both, Shared, writes::send_idle_pane_sent_then_user_item_and_reply),
        case!(Both, Shared, writes::send_during_turn_queued_then_delivered),
        case!(Both, Shared, writes::send_refused_ask_open_then_same_id_succeeds),
        case!(Both, Shared, writes::send_turn_moved_409_when_a_turn_began_after),
        case!(Both, Shared, writes::steer_during_turn_steered_into_reply),
        case!(Both, Shared, writes::steer_idle_pane_409_refused_not_working),
        case!(Both, Shared, writes::stop_aborts_the_running_turn),
        case!(Both, Shared, writes::stop_closes_open_asks_as_aborted),
        case!(Both, Shared, writes::action_refund_allow_issues_refund),
        case!(Both, Shared, writes::action_refund_deny_not_issued),
        case!(Both, Shared, writes::action_unknown_404),
        case!(Both, Shared, writes::announcements_has_no_handler_not_supported),
        case!(Both, Shared, writes::write_unknown_pane_404),
        case!(Both, Shared, writes::write_request_id_rule_400),
        case!(Both, Shared, writes::send_text_over_64k_400_never_cut),
        case!(Both, Shared, writes::path_ids_percent_decoded_before_the_id_rule),
        case!(Both, Shared, writes::rename_workspace_tab_pane_renamed),
        case!(Both, Shared, writes::close_and_reopen_pane),
        case!(Both, Shared, receipts::receipt_replayed_same_status_and_body),
        case!(Both, Shared, receipts::receipt_found_by_request_id_whatever_the_route),
        case!(Both, Shared, history::history_rows_page_with_cursors),
        case!(Both, Shared, history::history_limit_outside_1_to_200_is_400),
        case!(Both, Shared, history::history_cursor_rule_400),
        case!(Both, Shared, history::history_session_items_page),
        case!(Both, Shared, history::history_unknown_session_404),
        case!(Both, Shared, malformed::malformed_json_400_bad_request),
        case!(Both, Shared, malformed::unknown_route_404_not_found),
        case!(Both, Shared, malformed::wrong_method_405_with_allow),
        case!(Both, Shared, malformed::body_over_1mib_413_too_large),
        case!(Both, Shared, malformed::unknown_request_fields_ignored),
        case!(Both, Shared, malformed::keep_alive_serves_several_polls_on_one_connection),
        case!(Both, Shared, writes::refusal_stores_nothing_same_request_id_retries),
        case!(Tls, Shared, tokens::token_missing_401_token_refused),
        case!(Tls, Shared, tokens::token_wrong_401_and_nothing_runs),
        case!(Tls, Shared, tokens::token_next_accepted),
        case!(Socket, Shared, socket::socket_and_its_folder_are_private),
        case!(Tls, Shared, tokens::token_never_in_the_agent_output),
        case!(Both, Own, knobs::caps_declared_list_only_and_off_routes_not_supported),
        case!(Both, Own, knobs::busy_409_after_5s_waiting_for_the_pane_lock),
        case!(Both, Own, knobs::stop_never_waits_behind_a_write_lock),
        case!(Both, Own, knobs::repeat_while_processing_waits_for_the_first),
        case!(Both, Own, knobs::close_tab_removes_its_panes),
        case!(Both, Own, knobs::events_behind_the_tail_get_the_view),
        case!(Both, Own, receipts::receipt_dropped_after_eviction),
        case!(Both, Own, receipts::receipts_replayed_after_sigkill_restart),
        case!(Both, Own, receipts::epoch_changes_when_the_agent_restarts),
        case!(Both, Own, receipts::answer_held_across_restart_then_applied),
        case!(Both, Own, receipts::held_answer_with_other_hash_discarded_then_id_free),
        case!(Both, Own, receipts::held_answer_dropped_after_hold_ms),
        case!(Socket, Own, socket::socket_folder_not_private_refused_at_startup),
        case!(Socket, Own, socket::socket_path_over_103_bytes_refused_at_startup),
        case!(Socket, Own, socket::socket_in_use_refused_at_startup),
        case!(Socket, Own, socket::stale_socket_replaced_after_sigkill),
        case!(Tls, Own, tokens::token_shorter_than_32_bytes_refused_at_startup),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_rules_are_unique_snake_case() {
        let cases = all();
        let mut seen = std::collections::HashSet::new();
        for case in &cases {
            assert!(seen.insert(case.rule), "{} twice", case.rule);
            assert!(
                case.rule.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                case.rule
            );
        }
    }
}
