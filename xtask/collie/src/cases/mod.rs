//! The cases, each named after the rule it checks, in the order they run, and
//! the context a case gets: the transport, the shared desk, or desks of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::Suite;
use crate::check::CaseResult;
use crate::desk::{Desk, DeskSpec, Output, Transport};
use durable_cli::conformance::client::Client;

mod answers;
mod asks;
mod events;
mod hello;
mod history;
mod knobs;
mod receipts;
mod socket;
mod state;
mod tokens;
mod writes;

pub(crate) type CaseFuture = Pin<Box<dyn Future<Output = CaseResult>>>;

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
    pub(crate) stderr: Output,
}

impl Ctx {
    pub(crate) fn transport(&self) -> Transport {
        self.suite.transport
    }

    pub(crate) fn client(&self) -> CaseResult<Client> {
        self.shared
            .as_ref()
            .map(|s| s.client.clone())
            .ok_or_else(|| "no shared desk for this case".to_owned())
    }

    pub(crate) fn shared_stderr(&self) -> CaseResult<Output> {
        self.shared.as_ref().map(|s| s.stderr.clone()).ok_or_else(|| "no shared desk".to_owned())
    }

    /// A fresh data folder (and socket path) with these knobs.
    pub(crate) fn spec(&self, knobs: &[&str]) -> DeskSpec {
        self.suite.spec(knobs)
    }

    /// A desk of the case's own, fresh data folder.
    pub(crate) async fn desk(&self, knobs: &[&str]) -> CaseResult<Desk> {
        Desk::start(self.spec(knobs)).await
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
        case!(Both, Shared, hello::hello_desk_declares_its_host_and_caps),
        case!(Both, Shared, hello::hello_post_incompatible_warns_once_per_collie_version),
        case!(Both, Shared, state::state_shows_the_desks_layout),
        case!(Both, Shared, state::state_since_send_changes_only_that_pane),
        case!(Both, Shared, state::state_since_layout_change_brings_layout_fields),
        case!(Both, Shared, events::events_after_lists_events_and_next),
        case!(Both, Shared, writes::starter_new_ticket_started_with_next_pane),
        case!(Both, Shared, asks::ask_choice_end_to_end),
        case!(Both, Shared, asks::ask_multi_end_to_end),
        case!(Both, Shared, asks::ask_text_end_to_end),
        case!(Both, Shared, asks::ask_form_end_to_end),
        case!(Both, Shared, asks::ask_approve_end_to_end),
        case!(Both, Shared, asks::ask_expiry_closes_with_timeout_and_one_notice),
        case!(Both, Shared, asks::answer_hash_mismatch_409_with_current_ask),
        case!(Both, Shared, asks::answer_single_use_second_request_id_409_ask_closed),
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
        case!(Both, Shared, writes::stop_aborts_the_running_turn),
        case!(Both, Shared, writes::stop_closes_open_asks_as_aborted),
        case!(Both, Shared, writes::action_refund_allow_issues_refund),
        case!(Both, Shared, writes::action_refund_deny_not_issued),
        case!(Both, Shared, writes::announcements_has_no_handler_not_supported),
        case!(Both, Shared, writes::rename_workspace_tab_pane_renamed),
        case!(Both, Shared, writes::close_and_reopen_ticket_closes_its_asks),
        case!(Both, Shared, history::history_rows_of_tickets_page_with_cursors),
        case!(Both, Shared, history::history_session_items_page),
        case!(Both, Shared, writes::refusal_stores_nothing_same_request_id_retries),
        case!(Both, Own, knobs::caps_declared_list_only_and_off_routes_not_supported),
        case!(Both, Own, knobs::busy_409_after_5s_waiting_for_the_pane_lock),
        case!(Both, Own, knobs::stop_never_waits_behind_a_write_lock),
        case!(Both, Own, knobs::repeat_while_processing_waits_for_the_first),
        case!(Both, Own, knobs::close_tab_removes_its_panes),
        case!(Both, Own, knobs::events_behind_the_tail_get_the_view),
        case!(Both, Own, receipts::receipt_dropped_after_eviction),
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
