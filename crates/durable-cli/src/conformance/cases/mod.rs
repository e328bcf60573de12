//! The generic tier: what the wire promises for what the agent declares,
//! assuming nothing about its content. The panes, the actions, the
//! starters and the cards come from the agent's own hello and state. By
//! default a case only reads, or sends what cannot act (unknown ids,
//! malformed bodies, refused callers); the cases marked `writes` act (a
//! send, the declared actions and starters, answers to the agent's cards,
//! rename, close and reopen) and run with `--writes` only; the cases marked
//! `restart` kill the agent started with `--agent-cmd` and start it again.
//!
//! The cases live in one file per topic of the wire, as the desk's do
//! (`xtask/collie/src/cases/`), each named after the rule it checks; this
//! file holds the context a case gets ([`Ctx`]), the list in running order
//! ([`all`]) and the helpers several topics use.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::agent::Agent;
use super::check::{CaseResult, arr_of, ids, pane_in, rid, sha256_hex, state, wait_for};
use super::client::Client;
use super::wire;

mod answers;
mod asks;
mod conventions;
mod events;
mod hello;
mod history;
mod receipts;
mod socket;
mod state;
mod tokens;
mod writes;

/// How the agent is reached: the names printed after each case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The private Unix socket.
    Socket,
    /// HTTPS with a bearer token.
    Tls,
    /// Plain HTTP on loopback (with a bearer token).
    Http,
}

impl Kind {
    /// `socket`, `tls` or `http`: the tag after each case name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Socket => "socket",
            Kind::Tls => "tls",
            Kind::Http => "http",
        }
    }
}

pub(crate) type CaseFuture = Pin<Box<dyn Future<Output = CaseResult>>>;

/// What a case needs beyond the agent's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Needs {
    /// Only reads, or sends what cannot act.
    Read,
    /// `--writes`.
    Writes,
    /// `--agent-cmd` (the agent is killed and started again).
    Restart,
    /// `--agent-cmd`, `--writes` and `--receipts-persist`.
    PersistentReceipts,
}

pub(crate) struct Case {
    pub(crate) rule: &'static str,
    pub(crate) needs: Needs,
    /// Whether the agent's declarations and the transport let the case apply.
    pub(crate) applies: fn(&Ctx) -> bool,
    pub(crate) run: fn(Ctx) -> CaseFuture,
}

impl Case {
    pub(crate) fn name(&self, kind: Kind) -> String {
        format!("{} [{}]", self.rule, kind.name())
    }
}

/// What a case sees: the agent as it declared itself at the start.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) client: Arc<Mutex<Client>>,
    pub(crate) kind: Kind,
    pub(crate) hello: Value,
    pub(crate) state: Value,
    pub(crate) token: Option<String>,
    pub(crate) token_next: Option<String>,
    pub(crate) socket: Option<PathBuf>,
    pub(crate) agent: Option<Arc<tokio::sync::Mutex<Agent>>>,
}

impl Ctx {
    /// The client (a new one after a restart).
    pub(crate) fn client(&self) -> Client {
        self.client.lock().map(|c| c.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    pub(crate) fn cap(&self, name: &str) -> bool {
        self.hello["caps"][name] == true
    }

    /// The panes the agent showed at the start, in its order.
    pub(crate) fn panes(&self) -> Vec<String> {
        ids(self.state["panes"].as_array().map(Vec::as_slice).unwrap_or(&[]))
    }

    fn first_pane(&self) -> CaseResult<String> {
        self.panes().into_iter().next().ok_or_else(|| "the agent shows no pane".to_owned())
    }

    /// The panes that declare at least one action, with their action ids.
    fn actions(&self) -> Vec<(String, Vec<String>)> {
        self.state["panes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let actions = ids(p["actions"].as_array()?);
                Some((p["id"].as_str()?.to_owned(), actions)).filter(|(_, a)| !a.is_empty())
            })
            .collect()
    }

    fn starters(&self) -> Vec<String> {
        ids(self.state["starters"].as_array().map(Vec::as_slice).unwrap_or(&[]))
    }

    /// `SIGKILL`, start again, and use the new agent's client (its pin).
    async fn restart(&self) -> CaseResult<()> {
        let agent = self.agent.as_ref().ok_or("no --agent-cmd to restart the agent with")?;
        let mut agent = agent.lock().await;
        agent.restart().await?;
        if let Ok(mut c) = self.client.lock() {
            *c = agent.client.clone();
        }
        Ok(())
    }
}

fn always(_: &Ctx) -> bool {
    true
}

macro_rules! case {
    ($needs:ident, $applies:expr, $module:ident :: $rule:ident) => {
        Case {
            rule: stringify!($rule),
            needs: Needs::$needs,
            applies: $applies,
            run: |cx| Box::pin($module::$rule(cx)),
        }
    };
}

/// Every case, in running order: the reads first, then the writes, then
/// the restarts.
pub(crate) fn all() -> Vec<Case> {
    vec![
        case!(Read, always, hello::hello_says_wire_1_and_caps),
        case!(Read, always, hello::hello_epoch_is_in_every_state_answer),
        case!(Read, always, hello::hello_post_compatible_when_ranges_overlap),
        case!(Read, always, hello::hello_post_incompatible_answers_compatible_false),
        case!(Read, always, conventions::responses_are_json_objects_with_ok),
        case!(Read, always, state::state_full_has_every_field),
        case!(Read, always, state::state_etag_is_epoch_dash_seq),
        case!(Read, always, state::state_304_when_etag_matches),
        case!(Read, always, state::state_full_when_since_is_zero_or_ahead),
        case!(Read, always, state::state_since_current_seq_is_a_delta),
        case!(Read, |cx| cx.cap("asks"), asks::asks_in_the_state_are_well_formed),
        case!(Read, |cx| !cx.panes().is_empty(), events::events_list_consecutive_seqs_and_next),
        case!(Read, |cx| !cx.panes().is_empty(), events::events_next_is_after_when_none_returned),
        case!(Read, |cx| !cx.panes().is_empty(), events::events_after_beyond_last_gives_snapshot),
        case!(Read, |cx| !cx.panes().is_empty(), events::events_unknown_pane_404),
        case!(Read, always, conventions::malformed_json_400_bad_request),
        case!(Read, always, conventions::unknown_route_404_not_found),
        case!(Read, always, conventions::wrong_method_405_with_allow),
        case!(Read, always, conventions::body_over_1mib_413_too_large),
        case!(Read, always, conventions::unknown_request_fields_ignored),
        case!(Read, always, conventions::keep_alive_serves_several_polls_on_one_connection),
        case!(Read, |cx| writes::write_route(cx).is_some(), writes::write_request_id_rule_400),
        case!(
            Read,
            |cx| ["send", "steer", "abort"].iter().any(|c| cx.cap(c)),
            writes::write_unknown_pane_404
        ),
        case!(Read, |cx| cx.cap("send"), writes::send_text_over_64k_400_never_cut),
        case!(Read, |cx| cx.cap("send"), writes::path_ids_percent_decoded_before_the_id_rule),
        case!(Read, |cx| cx.cap("actions") && !cx.actions().is_empty(), writes::action_unknown_404),
        case!(Read, |cx| cx.cap("starters"), writes::starter_unknown_404),
        case!(Read, |cx| cx.cap("asks"), answers::answer_malformed_body_400_before_anything_else),
        case!(Read, |cx| cx.cap("asks"), answers::answer_unknown_ask_with_hash_202_held),
        case!(Read, |cx| cx.cap("asks"), answers::answer_unknown_ask_without_hash_404),
        case!(
            Read,
            |cx| wire::CAP_NAMES.iter().any(|c| *c != "terminal" && !cx.cap(c)),
            hello::caps_off_routes_not_supported
        ),
        case!(Read, |cx| cx.cap("history"), history::history_rows_page_with_cursors),
        case!(Read, |cx| cx.cap("history"), history::history_limit_outside_1_to_200_is_400),
        case!(Read, |cx| cx.cap("history"), history::history_cursor_rule_400),
        case!(Read, |cx| cx.cap("history"), history::history_unknown_session_404),
        case!(Read, |cx| cx.cap("history"), history::history_rows_count_their_items),
        case!(Read, |cx| cx.cap("history"), history::history_open_panes_read_their_conversation),
        case!(Read, |cx| cx.kind != Kind::Socket, tokens::token_missing_401_token_refused),
        case!(Read, |cx| cx.kind != Kind::Socket, tokens::token_wrong_401_and_nothing_runs),
        case!(Read, |cx| cx.kind != Kind::Socket, tokens::token_401_closes_the_connection),
        case!(Read, |cx| cx.kind != Kind::Socket && cx.token_next.is_some(), tokens::token_next_accepted),
        case!(
            Read,
            |cx| cx.kind != Kind::Socket && cx.agent.is_some(),
            tokens::token_never_in_the_agent_output
        ),
        case!(Read, |cx| cx.kind == Kind::Socket, socket::socket_and_its_folder_are_private),
        case!(Writes, |cx| cx.cap("send"), writes::send_sent_then_user_item_and_idle),
        case!(Writes, |cx| cx.cap("send"), receipts::receipt_replayed_same_status_and_body),
        case!(
            Writes,
            |cx| cx.cap("send") && cx.cap("abort"),
            receipts::receipt_found_by_request_id_whatever_the_route
        ),
        case!(
            Writes,
            |cx| cx.cap("send") && cx.cap("steer"),
            writes::steer_idle_pane_409_refused_not_working
        ),
        case!(Writes, |cx| cx.cap("actions") && !cx.actions().is_empty(), writes::actions_declared_are_done),
        case!(Writes, |cx| cx.cap("asks"), asks::asks_raised_are_answered_once),
        case!(Writes, |cx| cx.cap("starters") && !cx.starters().is_empty(), writes::starters_declared_start),
        case!(Writes, |cx| cx.cap("rename") && !cx.panes().is_empty(), writes::rename_pane_renamed),
        case!(
            Writes,
            |cx| cx.cap("close") && cx.cap("reopen") && !cx.panes().is_empty(),
            writes::close_and_reopen_pane
        ),
        case!(Restart, always, hello::epoch_changes_when_the_agent_restarts),
        case!(
            PersistentReceipts,
            |cx| receipts::write_that_acts(cx).is_some(),
            receipts::receipts_replayed_after_sigkill_restart
        ),
    ]
}

/// The pane's row in a fresh state.
async fn pane_now(c: &Client, p: &str) -> CaseResult<Value> {
    let s = state(c).await?;
    pane_in(&s, p).cloned().ok_or_else(|| format!("pane {p} is not in the state"))
}

async fn wait_idle(c: &Client, p: &str) -> CaseResult<Value> {
    wait_for(&format!("{p} to be idle"), Duration::from_secs(30), || async {
        let pane = pane_now(c, p).await?;
        Ok((pane["state"] == "idle").then_some(pane))
    })
    .await
}

/// An ask id nobody raised.
fn unknown_ask() -> String {
    sha256_hex(rid("unknown").as_bytes())[..32].to_owned()
}

/// A pane id the agent does not show.
fn unknown_pane(cx: &Ctx) -> String {
    let mut id = "no-such-pane".to_owned();
    while cx.panes().contains(&id) {
        id.push('x');
    }
    id
}

/// A pane that takes a send: the first idle pane that answers `sent`.
/// Returns the pane, the request id, the body sent and the answer.
async fn send_somewhere(c: &Client, cx: &Ctx, text: &str) -> CaseResult<(String, String, Value, Value)> {
    let mut tried = Vec::new();
    for p in cx.panes() {
        let pane = pane_now(c, &p).await?;
        if pane["state"] != "idle" || !arr_of(&pane, "openAsks")?.is_empty() {
            tried.push(format!("{p}: {} with {} open asks", pane["state"], pane["openAsks"]));
            continue;
        }
        let request_id = rid("send");
        let body = json!({"requestId": request_id, "text": text});
        let r = c.post(&format!("/v1/panes/{}/send", crate::link::enc(&p)), &body).await?;
        if r.status == 409 && (r.json["code"] == "not-supported" || r.json["code"] == "refused") {
            tried.push(format!("{p}: {} {}", r.status, r.json["code"]));
            continue;
        }
        let answer = r.ok()?.clone();
        return Ok((p, request_id, body, answer));
    }
    Err(format!("no pane took a send: {}", tried.join("; ")))
}

fn json_bytes(v: Value) -> Bytes {
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_rules_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for case in all() {
            assert!(seen.insert(case.rule), "{} twice", case.rule);
            assert!(
                case.rule.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                case.rule
            );
        }
    }
}
