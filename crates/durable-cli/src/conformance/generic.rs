//! The generic tier: what the wire promises for what the agent declares,
//! assuming nothing about its content. The panes, the actions, the
//! starters and the cards come from the agent's own hello and state. By
//! default a case only reads, or sends what cannot act (unknown ids,
//! malformed bodies, refused callers); the cases marked `writes` act (a
//! send, the declared actions and starters, answers to the agent's cards,
//! rename, close and reopen) and run with `--writes` only; the cases marked
//! `restart` kill the agent started with `--agent-cmd` and start it again.

use std::future::Future;
#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};

use super::agent::Agent;
use super::check::{
    R, answer as post_answer, arr_of, ask_hash, ask_id_for, bool_of, check_answered, cut, ensure,
    events_after, expect_replay, field, ids, is_lower_hex, items_after, kind_is, mark, open_asks, pane_in,
    replayed, rid, sha256_hex, state, str_of, time_of, u64_of, wait_for,
};
use super::client::{Auth, Client, Resp};
use super::wire;

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

pub(crate) type CaseFuture = Pin<Box<dyn Future<Output = R>>>;

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
    pub(crate) applies: fn(&G) -> bool,
    pub(crate) run: fn(G) -> CaseFuture,
}

impl Case {
    pub(crate) fn name(&self, kind: Kind) -> String {
        format!("{} [{}]", self.rule, kind.name())
    }
}

/// What a case sees: the agent as it declared itself at the start.
#[derive(Clone)]
pub(crate) struct G {
    pub(crate) client: Arc<Mutex<Client>>,
    pub(crate) kind: Kind,
    pub(crate) hello: Value,
    pub(crate) state: Value,
    pub(crate) token: Option<String>,
    pub(crate) token_next: Option<String>,
    pub(crate) socket: Option<PathBuf>,
    pub(crate) agent: Option<Arc<tokio::sync::Mutex<Agent>>>,
}

impl G {
    /// The client (a new one after a restart).
    pub(crate) fn c(&self) -> Client {
        self.client.lock().map(|c| c.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    pub(crate) fn cap(&self, name: &str) -> bool {
        self.hello["caps"][name] == true
    }

    /// The panes the agent showed at the start, in its order.
    pub(crate) fn panes(&self) -> Vec<String> {
        ids(self.state["panes"].as_array().map(Vec::as_slice).unwrap_or(&[]))
    }

    fn first_pane(&self) -> R<String> {
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
    async fn restart(&self) -> R<()> {
        let agent = self.agent.as_ref().ok_or("no --agent-cmd to restart the agent with")?;
        let mut agent = agent.lock().await;
        agent.restart().await?;
        if let Ok(mut c) = self.client.lock() {
            *c = agent.client.clone();
        }
        Ok(())
    }
}

fn always(_: &G) -> bool {
    true
}

macro_rules! case {
    ($needs:ident, $applies:expr, $rule:ident) => {
        Case { rule: stringify!($rule), needs: Needs::$needs, applies: $applies, run: |g| Box::pin($rule(g)) }
    };
}

/// Every case, in running order: the reads first, then the writes, then
/// the restarts.
pub(crate) fn all() -> Vec<Case> {
    vec![
        case!(Read, always, hello_says_wire_1_and_caps),
        case!(Read, always, hello_epoch_is_in_every_state_answer),
        case!(Read, always, hello_post_compatible_when_ranges_overlap),
        case!(Read, always, hello_post_incompatible_answers_compatible_false),
        case!(Read, always, responses_are_json_objects_with_ok),
        case!(Read, always, state_full_has_every_field),
        case!(Read, always, state_etag_is_epoch_dash_seq),
        case!(Read, always, state_304_when_etag_matches),
        case!(Read, always, state_full_when_since_is_zero_or_ahead),
        case!(Read, always, state_since_current_seq_is_a_delta),
        case!(Read, |g| g.cap("asks"), asks_in_the_state_are_well_formed),
        case!(Read, |g| !g.panes().is_empty(), events_list_consecutive_seqs_and_next),
        case!(Read, |g| !g.panes().is_empty(), events_next_is_after_when_none_returned),
        case!(Read, |g| !g.panes().is_empty(), events_after_beyond_last_gives_snapshot),
        case!(Read, |g| !g.panes().is_empty(), events_unknown_pane_404),
        case!(Read, always, malformed_json_400_bad_request),
        case!(Read, always, unknown_route_404_not_found),
        case!(Read, always, wrong_method_405_with_allow),
        case!(Read, always, body_over_1mib_413_too_large),
        case!(Read, always, unknown_request_fields_ignored),
        case!(Read, always, keep_alive_serves_several_polls_on_one_connection),
        case!(Read, |g| write_route(g).is_some(), write_request_id_rule_400),
        case!(Read, |g| ["send", "steer", "abort"].iter().any(|c| g.cap(c)), write_unknown_pane_404),
        case!(Read, |g| g.cap("send"), send_text_over_64k_400_never_cut),
        case!(Read, |g| g.cap("send"), path_ids_percent_decoded_before_the_id_rule),
        case!(Read, |g| g.cap("actions") && !g.actions().is_empty(), action_unknown_404),
        case!(Read, |g| g.cap("starters"), starter_unknown_404),
        case!(Read, |g| g.cap("asks"), answer_malformed_body_400_before_anything_else),
        case!(Read, |g| g.cap("asks"), answer_unknown_ask_with_hash_202_held),
        case!(Read, |g| g.cap("asks"), answer_unknown_ask_without_hash_404),
        case!(
            Read,
            |g| wire::CAP_NAMES.iter().any(|c| *c != "terminal" && !g.cap(c)),
            caps_off_routes_not_supported
        ),
        case!(Read, |g| g.cap("history"), history_rows_page_with_cursors),
        case!(Read, |g| g.cap("history"), history_limit_outside_1_to_200_is_400),
        case!(Read, |g| g.cap("history"), history_cursor_rule_400),
        case!(Read, |g| g.cap("history"), history_unknown_session_404),
        case!(Read, |g| g.kind != Kind::Socket, token_missing_401_token_refused),
        case!(Read, |g| g.kind != Kind::Socket, token_wrong_401_and_nothing_runs),
        case!(Read, |g| g.kind != Kind::Socket, token_401_closes_the_connection),
        case!(Read, |g| g.kind != Kind::Socket && g.token_next.is_some(), token_next_accepted),
        case!(Read, |g| g.kind != Kind::Socket && g.agent.is_some(), token_never_in_the_agent_output),
        case!(Read, |g| g.kind == Kind::Socket, socket_and_its_folder_are_private),
        case!(Writes, |g| g.cap("send"), send_sent_then_user_item_and_idle),
        case!(Writes, |g| g.cap("send"), receipt_replayed_same_status_and_body),
        case!(Writes, |g| g.cap("send") && g.cap("abort"), receipt_found_by_request_id_whatever_the_route),
        case!(Writes, |g| g.cap("send") && g.cap("steer"), steer_idle_pane_409_refused_not_working),
        case!(Writes, |g| g.cap("actions") && !g.actions().is_empty(), actions_declared_are_done),
        case!(Writes, |g| g.cap("asks"), asks_raised_are_answered_once),
        case!(Writes, |g| g.cap("starters") && !g.starters().is_empty(), starters_declared_start),
        case!(Writes, |g| g.cap("rename") && !g.panes().is_empty(), rename_pane_renamed),
        case!(Writes, |g| g.cap("close") && g.cap("reopen") && !g.panes().is_empty(), close_and_reopen_pane),
        case!(Restart, always, epoch_changes_when_the_agent_restarts),
        case!(PersistentReceipts, |g| write_that_acts(g).is_some(), receipts_replayed_after_sigkill_restart),
    ]
}

// ---------------------------------------------------------------- helpers

/// The pane's row in a fresh state.
async fn pane_now(c: &Client, p: &str) -> R<Value> {
    let s = state(c).await?;
    pane_in(&s, p).cloned().ok_or_else(|| format!("pane {p} is not in the state"))
}

async fn wait_idle(c: &Client, p: &str) -> R<Value> {
    wait_for(&format!("{p} to be idle"), Duration::from_secs(30), || async {
        let pane = pane_now(c, p).await?;
        Ok((pane["state"] == "idle").then_some(pane))
    })
    .await
}

fn check_write(body: &Value, result: &str, request_id: &str) -> R {
    ensure!(body["result"] == result, "result {} (expected {result})", body["result"]);
    ensure!(body["requestId"] == request_id, "requestId {} (expected {request_id})", body["requestId"]);
    ensure!(body["replayed"] == false, "replayed {} on a first request", body["replayed"]);
    Ok(())
}

/// An ask id nobody raised.
fn unknown_ask() -> String {
    sha256_hex(rid("unknown").as_bytes())[..32].to_owned()
}

/// A pane id the agent does not show.
fn unknown_pane(g: &G) -> String {
    let mut id = "no-such-pane".to_owned();
    while g.panes().contains(&id) {
        id.push('x');
    }
    id
}

/// An absolute path on the agent's machine, whatever its system: `/…`,
/// `C:\…` or `C:/…`, or a UNC path `\\server\share…`.
fn is_absolute_anywhere(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
}

/// A write route whose capability is on, with a body the route takes: the
/// request id rule is checked there (after the capability, before anything runs).
fn write_route(g: &G) -> Option<(String, Value)> {
    // A pane the agent does not have: the request id is checked first (§8).
    let pane = unknown_pane(g);
    let routes = [
        ("send", format!("/v1/panes/{}/send", crate::link::enc(&pane)), json!({"text": "x"})),
        ("steer", format!("/v1/panes/{}/steer", crate::link::enc(&pane)), json!({"text": "x"})),
        ("abort", format!("/v1/panes/{}/stop", crate::link::enc(&pane)), json!({})),
        ("rename", "/v1/rename".to_owned(), json!({"target": "pane", "id": pane, "title": "x"})),
        ("close", "/v1/close".to_owned(), json!({"target": "pane", "id": pane})),
        ("reopen", "/v1/reopen".to_owned(), json!({"id": pane})),
        ("starters", "/v1/starters/x".to_owned(), json!({})),
        ("actions", format!("/v1/panes/{}/actions/x", crate::link::enc(&pane)), json!({})),
    ];
    routes.into_iter().find(|(cap, _, _)| g.cap(cap)).map(|(_, path, body)| (path, body))
}

/// A write that acts, for the restart case: a rename of a pane to its own
/// title (nothing changes), else a send, else the first declared action.
fn write_that_acts(g: &G) -> Option<(String, Value)> {
    let first = g.state["panes"].as_array()?.first()?;
    let pane = first["id"].as_str()?;
    if g.cap("rename") {
        let title = first["title"].as_str().unwrap_or(pane);
        return Some(("/v1/rename".to_owned(), json!({"target": "pane", "id": pane, "title": title})));
    }
    if g.cap("send") {
        let path = format!("/v1/panes/{}/send", crate::link::enc(pane));
        return Some((path, json!({"text": "conformance: kept across a restart"})));
    }
    if g.cap("actions") {
        let (p, actions) = g.actions().into_iter().next()?;
        let path =
            format!("/v1/panes/{}/actions/{}", crate::link::enc(&p), crate::link::enc(actions.first()?));
        return Some((path, json!({})));
    }
    None
}

/// A pane that takes a send: the first idle pane that answers `sent`.
/// Returns the pane, the request id, the body sent and the answer.
async fn send_somewhere(c: &Client, g: &G, text: &str) -> R<(String, String, Value, Value)> {
    let mut tried = Vec::new();
    for p in g.panes() {
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

// ---------------------------------------------------------------- §3 hello

async fn hello_says_wire_1_and_caps(g: G) -> R {
    let r = g.c().get("/hello").await?;
    let h = r.ok()?;
    let (min, max) = (u64_of(&h["wire"], "min")?, u64_of(&h["wire"], "max")?);
    ensure!(
        min <= wire::WIRE_VERSION && wire::WIRE_VERSION <= max,
        "wire {} does not include v{}",
        h["wire"],
        wire::WIRE_VERSION
    );
    let sdk = field(h, "sdk")?;
    ensure!(!str_of(sdk, "name")?.is_empty(), "sdk.name is empty");
    ensure!(!str_of(sdk, "version")?.is_empty(), "sdk.version is empty");
    if sdk["name"] == wire::SDK_NAME {
        ensure!(h["runtime"] == "rust", "runtime is {} (this SDK is Rust)", h["runtime"]);
    }
    str_of(h, "host")?;
    str_of(h, "runtime")?;
    bool_of(h, "ready")?;
    let epoch = str_of(h, "epoch")?;
    ensure!(is_lower_hex(epoch, 16), "epoch {epoch:?} is not 16 lowercase hex characters");
    let check = str_of(h, "callerCheck")?;
    let allowed: &[&str] = match g.kind {
        Kind::Socket => &["on", "off", "unavailable"],
        Kind::Tls | Kind::Http => &["token"],
    };
    ensure!(allowed.contains(&check), "callerCheck is {check:?} (expected one of {allowed:?})");
    let caps = h.get("caps").and_then(Value::as_object).ok_or("hello has no `caps` object")?;
    let mut wrong = Vec::new();
    for cap in wire::CAP_NAMES {
        if caps.get(cap).and_then(Value::as_bool).is_none() {
            wrong.push(format!("{cap} is {:?}", caps.get(cap)));
        }
    }
    ensure!(wrong.is_empty(), "every capability is a bool: {}", wrong.join(", "));
    ensure!(caps["terminal"] == false, "terminal is true (a durable agent has no screen)");
    Ok(())
}

async fn hello_epoch_is_in_every_state_answer(g: G) -> R {
    let c = g.c();
    let epoch = c.get("/hello").await?.ok()?["epoch"].clone();
    let full = state(&c).await?;
    ensure!(full["epoch"] == epoch, "state epoch {} differs from hello's {epoch}", full["epoch"]);
    let since = c.get("/v1/state?since=1").await?;
    ensure!(
        since.ok()?["epoch"] == epoch,
        "since answer epoch {} differs from hello's {epoch}",
        since.json["epoch"]
    );
    Ok(())
}

async fn hello_post_compatible_when_ranges_overlap(g: G) -> R {
    let c = g.c();
    let ours = c.get("/hello").await?.ok()?["wire"].clone();
    for w in [json!({"min": 1, "max": 1}), json!({"min": 1, "max": 3}), json!({"min": 0, "max": 1})] {
        let r = c.post("/hello", &json!({"collie": {"version": "1.22.0"}, "wire": w})).await?;
        let body = r.ok()?;
        ensure!(body["compatible"] == true, "Collie wire {w}: compatible is {}", body["compatible"]);
        ensure!(body["wire"] == ours, "answer wire is {} (GET /hello says {ours})", body["wire"]);
    }
    Ok(())
}

async fn hello_post_incompatible_answers_compatible_false(g: G) -> R {
    let c = g.c();
    let max = u64_of(&c.get("/hello").await?.ok()?["wire"], "max")?;
    let w = json!({"min": max.saturating_add(1), "max": max.saturating_add(2)});
    let r = c.post("/hello", &json!({"collie": {"version": "0.0.1-conformance"}, "wire": w})).await?;
    let body = r.ok()?;
    ensure!(body["compatible"] == false, "Collie wire {w}: compatible is {}", body["compatible"]);
    c.post_raw("/hello", Bytes::from_static(b"{\"collie\": {\"version\": \"1\"}}"))
        .await?
        .refused(400, "bad-request")
        .map_err(|e| format!("a body without `wire`: {e}"))?;
    Ok(())
}

async fn responses_are_json_objects_with_ok(g: G) -> R {
    let c = g.c();
    for (path, status) in [("/hello", 200), ("/v1/state", 200), ("/v1/nope", 404)] {
        let r = c.get(path).await?;
        ensure!(r.status == status, "GET {path}: status {} (expected {status})", r.status);
        let ct = r.header("content-type").unwrap_or("");
        ensure!(ct.starts_with("application/json"), "GET {path}: Content-Type {ct:?}");
        ensure!(
            r.json.get("ok").is_some_and(|v| v.is_boolean()),
            "GET {path}: body without a boolean ok: {}",
            r.body_text()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- §5 state

const EVERY_FIELD: [&str; 11] =
    ["ok", "epoch", "seq", "ready", "full", "workspaces", "panes", "removed", "closed", "starters", "asks"];

async fn state_full_has_every_field(g: G) -> R {
    let s = state(&g.c()).await?;
    let missing: Vec<&str> = EVERY_FIELD.iter().copied().filter(|f| s.get(*f).is_none()).collect();
    ensure!(missing.is_empty(), "a full answer lacks {missing:?}");
    ensure!(s["full"] == true, "plain GET /v1/state: full is {}", s["full"]);
    bool_of(&s, "ready")?;
    ensure!(s["removed"] == json!([]), "a full answer has removed {}", s["removed"]);
    u64_of(&s, "seq")?;
    arr_of(&s, "asks")?;
    arr_of(&s, "closed")?;
    arr_of(&s, "starters")?;
    let panes = arr_of(&s, "panes")?;
    let mut tab_panes = Vec::new();
    for w in arr_of(&s, "workspaces")? {
        str_of(w, "id")?;
        str_of(w, "title")?;
        for t in arr_of(w, "tabs")? {
            str_of(t, "id")?;
            str_of(t, "title")?;
            for p in arr_of(t, "panes")? {
                let p =
                    p.as_str().ok_or_else(|| format!("tab {} lists a pane {p} that is no id", t["id"]))?;
                tab_panes.push((p.to_owned(), t["id"].clone()));
            }
        }
    }
    for p in panes {
        let id = str_of(p, "id")?;
        str_of(p, "title")?;
        ensure!(p["state"] == "idle" || p["state"] == "working", "pane {id}: state {}", p["state"]);
        ensure!(p["turnId"].is_string() || p["turnId"].is_null(), "pane {id}: turnId {}", p["turnId"]);
        u64_of(p, "lastSeq")?;
        arr_of(p, "openAsks")?;
        for a in arr_of(p, "actions")? {
            str_of(a, "id")?;
            str_of(a, "label")?;
        }
        if let Some(cwd) = p.get("cwd") {
            ensure!(cwd.as_str().is_some_and(is_absolute_anywhere), "pane {id}: cwd {cwd} is not absolute");
        }
        let tab = tab_panes.iter().find(|(pane, _)| pane == id).map(|(_, t)| t.clone());
        ensure!(tab.is_some(), "pane {id} is in no tab's panes");
        ensure!(p["tab"] == tab.unwrap_or_default(), "pane {id}: tab {} differs from the layout", p["tab"]);
    }
    for (p, tab) in &tab_panes {
        ensure!(pane_in(&s, p).is_some(), "tab {tab} lists pane {p}, which is not in panes");
    }
    for st in arr_of(&s, "starters")? {
        str_of(st, "id")?;
    }
    Ok(())
}

async fn state_etag_is_epoch_dash_seq(g: G) -> R {
    let r = g.c().get("/v1/state").await?;
    let s = r.ok()?;
    let want = format!("\"{}-{}\"", str_of(s, "epoch")?, u64_of(s, "seq")?);
    ensure!(r.header("etag") == Some(want.as_str()), "ETag {:?} (expected {want})", r.header("etag"));
    Ok(())
}

async fn get_if_none_match(c: &Client, path: &str, etag: &str) -> R<Resp> {
    c.request(Method::GET, path, None, &[("if-none-match", etag)], Auth::Default).await
}

async fn state_304_when_etag_matches(g: G) -> R {
    let c = g.c();
    // A busy agent may move between the two polls: three tries.
    let mut last = String::new();
    for _ in 0..3 {
        let r = c.get("/v1/state").await?;
        r.ok()?;
        let etag = r.header("etag").ok_or("no ETag on GET /v1/state")?.to_owned();
        let again = get_if_none_match(&c, "/v1/state", &etag).await?;
        if again.status == 304 {
            ensure!(again.body.is_empty(), "304 with a body: {}", again.body_text());
            let other = get_if_none_match(&c, "/v1/state", "\"0000000000000000-0\"").await?;
            ensure!(
                other.status == 200,
                "If-None-Match with another tag: status {} (expected 200)",
                other.status
            );
            return Ok(());
        }
        last = format!(
            "If-None-Match {etag}: status {} (expected 304, or 200 with a new ETag {:?})",
            again.status,
            again.header("etag")
        );
        ensure!(again.status == 200 && again.header("etag") != Some(etag.as_str()), "{last}");
    }
    Err(last)
}

async fn state_full_when_since_is_zero_or_ahead(g: G) -> R {
    let c = g.c();
    let seq = u64_of(&state(&c).await?, "seq")?;
    for since in [0, seq.saturating_add(1000)] {
        let r = c.get(&format!("/v1/state?since={since}")).await?;
        let d = r.ok()?;
        ensure!(d["full"] == true, "since={since} (current seq {seq}): full is {}", d["full"]);
        let missing: Vec<&str> = EVERY_FIELD.iter().copied().filter(|f| d.get(*f).is_none()).collect();
        ensure!(missing.is_empty(), "since={since}: a full answer lacks {missing:?}");
    }
    Ok(())
}

async fn state_since_current_seq_is_a_delta(g: G) -> R {
    let c = g.c();
    let r = c.get("/v1/state").await?;
    let seq = u64_of(r.ok()?, "seq")?;
    let d = c.get(&format!("/v1/state?since={seq}")).await?;
    let body = d.ok()?;
    ensure!(body["full"] == false, "since={seq} (the current seq): full is {}", body["full"]);
    for f in ["epoch", "seq", "ready", "panes", "removed", "asks"] {
        ensure!(body.get(f).is_some(), "since answer lacks `{f}`");
    }
    ensure!(u64_of(body, "seq")? >= seq, "seq went back from {seq} to {}", body["seq"]);
    let etag = d.header("etag").ok_or("no ETag on a since answer")?;
    let want = format!("\"{}-{}\"", str_of(body, "epoch")?, u64_of(body, "seq")?);
    ensure!(etag == want, "since ETag {etag} (expected {want})");
    Ok(())
}

// ---------------------------------------------------------------- §7 asks, as shown

/// What every ask object carries (§7), checked against our own ask id and hash.
fn check_card(ask: &Value) -> R {
    let id = str_of(ask, "id")?;
    ensure!(is_lower_hex(id, 32), "ask id {id:?} is not 32 lowercase hex");
    let pane = str_of(ask, "pane")?;
    let kind = str_of(ask, "kind")?;
    ensure!(["choice", "multi", "text", "form"].contains(&kind), "ask {id}: kind {kind:?}");
    let tool_call = str_of(ask, "toolCallId")?;
    ensure!(id == ask_id_for(pane, tool_call), "ask id {id} is not askIdFor({pane}, {tool_call})");
    str_of(ask, "itemId")?;
    let title = str_of(ask, "title")?;
    ensure!(!title.is_empty() && title.len() <= 256, "ask {id}: title {title:?}");
    time_of(ask, "createdAt")?;
    if ask.get("expiresAt").is_some() {
        time_of(ask, "expiresAt")?;
    }
    bool_of(ask, "readable")?;
    bool_of(ask, "cleaned")?;
    let nulls: Vec<&String> =
        ask.as_object().into_iter().flatten().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect();
    ensure!(nulls.is_empty(), "ask {id}: absent optional fields are omitted, never null: {nulls:?}");
    let hash = str_of(ask, "hash")?;
    ensure!(is_lower_hex(hash, 64), "ask {id}: hash {hash:?} is not 64 lowercase hex");
    let want = ask_hash(ask);
    ensure!(hash == want, "ask {id}: hash {hash} differs from SHA-256 of its canonical JSON ({want})");
    if kind == "choice" || kind == "multi" {
        let options = arr_of(ask, "options")?;
        ensure!(!options.is_empty(), "ask {id}: a {kind} without options");
        for o in options {
            str_of(o, "id")?;
            str_of(o, "label")?;
        }
    }
    if kind == "form" {
        for f in arr_of(ask, "fields")? {
            str_of(f, "id")?;
            str_of(f, "type")?;
        }
    }
    if let Some(tool) = ask.get("tool") {
        for f in ["name", "call", "args"] {
            ensure!(tool.get(f).is_some(), "ask {id}: the tool lacks `{f}`: {}", cut(tool));
        }
    }
    Ok(())
}

async fn asks_in_the_state_are_well_formed(g: G) -> R {
    let s = state(&g.c()).await?;
    for ask in open_asks(&s) {
        check_card(&ask)?;
        let pane = ask["pane"].as_str().unwrap_or("");
        let row =
            pane_in(&s, pane).ok_or_else(|| format!("ask {} names pane {pane}, not in panes", ask["id"]))?;
        ensure!(
            row["openAsks"].as_array().is_some_and(|o| o.contains(&ask["id"])),
            "pane {pane}: openAsks {} lacks {}",
            row["openAsks"],
            ask["id"]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- §6 events

const TYPES: [&str; 5] = ["item", "state", "ask", "ask-closed", "title"];

async fn events_list_consecutive_seqs_and_next(g: G) -> R {
    let c = g.c();
    for p in g.panes() {
        let r = c.get(&format!("/v1/panes/{}/events?after=0", crate::link::enc(&p))).await?;
        let body = r.ok()?;
        ensure!(body["pane"] == p.as_str(), "events of {p}: pane {}", body["pane"]);
        if bool_of(body, "snapshot")? {
            continue;
        }
        let events = arr_of(body, "events")?;
        let mut last: u64 = 0;
        for (i, e) in events.iter().enumerate() {
            let seq = u64_of(e, "seq")?;
            ensure!(
                i == 0 || Some(seq) == last.checked_add(1),
                "{p}: event seqs are not consecutive: {} after {last}",
                seq
            );
            last = seq;
            time_of(e, "ts")?;
            let ty = e["type"].as_str().unwrap_or("");
            ensure!(TYPES.contains(&ty), "{p}: event type {ty:?}");
            match ty {
                "item" => {
                    let item = field(e, "item")?;
                    ensure!(
                        item["id"].is_string() && item["kind"].is_string(),
                        "{p}: item without id/kind: {}",
                        cut(item)
                    );
                }
                "state" => {
                    ensure!(e["state"] == "idle" || e["state"] == "working", "{p}: state event {}", cut(e));
                    ensure!(e.get("turnId").is_some(), "{p}: state event without turnId: {}", cut(e));
                }
                _ => {}
            }
        }
        if let Some(e) = events.last() {
            ensure!(
                u64_of(body, "next")? == u64_of(e, "seq")?,
                "{p}: next {} (expected the last seq {last})",
                body["next"]
            );
        }
    }
    Ok(())
}

async fn events_next_is_after_when_none_returned(g: G) -> R {
    let c = g.c();
    let p = g.first_pane()?;
    let path = format!("/v1/panes/{}/events", crate::link::enc(&p));
    let mut last = String::new();
    for _ in 0..3 {
        let m = u64_of(&pane_now(&c, &p).await?, "lastSeq")?;
        let r = c.get(&format!("{path}?after={m}")).await?;
        let body = r.ok()?;
        if u64_of(body, "next")? != m {
            last = format!("after the last seq {m}: next {} (the pane moved?)", body["next"]);
            continue;
        }
        ensure!(body["snapshot"] == false, "after the last seq: snapshot {}", body["snapshot"]);
        ensure!(arr_of(body, "events")?.is_empty(), "events after the last seq: {}", cut(&body["events"]));
        let plain = c.get(&path).await?;
        let zero = c.get(&format!("{path}?after=0")).await?;
        ensure!(
            plain.ok()?["snapshot"] == zero.ok()?["snapshot"],
            "no `after` answers snapshot {}, after=0 answers snapshot {}",
            plain.json["snapshot"],
            zero.json["snapshot"]
        );
        return Ok(());
    }
    Err(last)
}

async fn events_after_beyond_last_gives_snapshot(g: G) -> R {
    let c = g.c();
    let p = g.first_pane()?;
    let m = u64_of(&pane_now(&c, &p).await?, "lastSeq")?;
    let r =
        c.get(&format!("/v1/panes/{}/events?after={}", crate::link::enc(&p), m.saturating_add(1000))).await?;
    let v = r.ok()?;
    ensure!(v["snapshot"] == true, "after beyond the last seq: snapshot {}", v["snapshot"]);
    ensure!(v["pane"] == p.as_str(), "pane {}", v["pane"]);
    let items = arr_of(v, "items")?;
    ensure!(v["state"] == "idle" || v["state"] == "working", "state {}", v["state"]);
    ensure!(v.get("turnId").is_some(), "the view lacks turnId");
    arr_of(v, "asks")?;
    bool_of(v, "dropped")?;
    ensure!(u64_of(v, "next")? >= m, "the view's next is {} (the pane's lastSeq was {m})", v["next"]);
    let mut seen = std::collections::HashSet::new();
    for item in items {
        let id = str_of(item, "id")?;
        str_of(item, "kind")?;
        ensure!(seen.insert(id.to_owned()), "item {id} is twice in the view");
    }
    Ok(())
}

async fn events_unknown_pane_404(g: G) -> R {
    let c = g.c();
    c.get(&format!("/v1/panes/{}/events?after=0", unknown_pane(&g))).await?.refused(404, "not-found")?;
    // Ids are percent-decoded before the rule: every byte of a real pane's id encoded.
    let p = g.first_pane()?;
    let encoded: String = p.bytes().map(|b| format!("%{b:02X}")).collect();
    let r = c.get(&format!("/v1/panes/{encoded}/events?after=0")).await?;
    ensure!(r.ok()?["pane"] == p.as_str(), "{encoded} answered pane {}", r.json["pane"]);
    Ok(())
}

// ---------------------------------------------------------------- §2 conventions

async fn malformed_json_400_bad_request(g: G) -> R {
    let c = g.c();
    // Malformed writes go to a pane the agent does not have: the body is
    // checked first (§8), and an agent that wrongly took one acts on nothing.
    let mut cases: Vec<(String, Vec<u8>)> =
        vec![("/hello".into(), b"nope".to_vec()), ("/hello".into(), b"{".to_vec())];
    let unknown = unknown_pane(&g);
    let pane = crate::link::enc(&unknown);
    if g.cap("send") {
        let send = format!("/v1/panes/{pane}/send");
        cases.push((send.clone(), b"{".to_vec()));
        cases.push((send.clone(), b"[]".to_vec()));
        cases.push((send.clone(), b"{\"requestId\": \"x-1\"}".to_vec()));
        cases.push((send, b"{\"requestId\": \"x-2\", \"text\": 5}".to_vec()));
    }
    if g.cap("rename") {
        cases.push(("/v1/rename".into(), b"{".to_vec()));
        let no_title = json!({"requestId": "x-3", "target": "pane", "id": unknown});
        cases.push(("/v1/rename".into(), no_title.to_string().into_bytes()));
    }
    if g.cap("close") {
        let no_target = json!({"requestId": "x-4", "target": "window", "id": unknown});
        cases.push(("/v1/close".into(), no_target.to_string().into_bytes()));
    }
    let mut wrong = Vec::new();
    for (path, body) in cases {
        let r = c.post_raw(&path, Bytes::from(body.clone())).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!(
                "POST {path} {}: {} {}",
                String::from_utf8_lossy(&body),
                r.status,
                r.body_text()
            ));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

async fn unknown_route_404_not_found(g: G) -> R {
    let c = g.c();
    let pane = crate::link::enc(&g.panes().into_iter().next().unwrap_or_else(|| "p".to_owned()));
    let nested = format!("/v1/panes/{pane}/nope");
    for path in ["/v1/nope", "/state", "/v2/state", "/v1/hello", nested.as_str()] {
        c.get(path).await?.refused(404, "not-found")?;
    }
    c.post(&nested, &json!({"requestId": rid("n")})).await?.refused(404, "not-found")?;
    Ok(())
}

async fn wrong_method_405_with_allow(g: G) -> R {
    let c = g.c();
    let mut wrong = Vec::new();
    let ask = format!("/v1/asks/{}", unknown_ask());
    for (method, path, allow) in [
        (Method::GET, "/v1/rename", &["POST"][..]),
        (Method::GET, "/v1/panes/p/send", &["POST"]),
        (Method::POST, "/v1/state", &["GET"]),
        (Method::PUT, ask.as_str(), &["POST"]),
        (Method::DELETE, "/hello", &["GET", "POST"]),
    ] {
        let body = (method == Method::POST || method == Method::PUT).then(|| Bytes::from_static(b"{}"));
        let r = c.request(method.clone(), path, body, &[], Auth::Default).await?;
        if let Err(why) = r.refused(405, "method-not-allowed") {
            wrong.push(why);
            continue;
        }
        let got = r.header("allow").unwrap_or("");
        let methods: Vec<&str> = got.split(',').map(str::trim).collect();
        if !allow.iter().all(|m| methods.contains(m)) {
            wrong.push(format!("{method} {path}: Allow {got:?} (expected {allow:?})"));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

fn body_of(len: usize) -> Vec<u8> {
    let head = br#"{"requestId": "big-1", "text": ""#;
    let tail = br#""}"#;
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(head);
    body.resize(len - tail.len(), b'a');
    body.extend_from_slice(tail);
    body
}

async fn body_over_1mib_413_too_large(g: G) -> R {
    let c = g.c();
    let over = body_of(wire::BODY_MAX + 1);
    c.post_early_answer("/hello", Bytes::from(over.clone())).await?.refused(413, "too-large")?;
    if g.cap("send") {
        // A pane the agent does not have: the size is checked first (§8).
        let pane = crate::link::enc(&unknown_pane(&g));
        let path = format!("/v1/panes/{pane}/send");
        c.post_early_answer(&path, Bytes::from(over)).await?.refused(413, "too-large")?;
        // Exactly 1 MiB is within the limit (then refused for its text over 64 KiB, not its size).
        c.post_raw(&path, Bytes::from(body_of(wire::BODY_MAX))).await?.refused(400, "bad-request")?;
    }
    Ok(())
}

async fn unknown_request_fields_ignored(g: G) -> R {
    let c = g.c();
    let body = json!({"collie": {"version": "1.22.0", "later": true}, "wire": {"min": 1, "max": 1},
                      "fromTheFuture": {"anything": [1, 2]}});
    let r = c.post("/hello", &body).await?;
    ensure!(r.ok()?["compatible"] == true, "POST /hello with unknown fields: {}", r.body_text());
    Ok(())
}

async fn keep_alive_serves_several_polls_on_one_connection(g: G) -> R {
    let answers =
        g.c().get_on_one_connection(&["/hello", "/v1/state", "/v1/state?since=1", "/v1/nope"]).await?;
    ensure!(answers.len() == 4, "{} answers to 4 requests", answers.len());
    answers[0].ok()?;
    answers[1].ok()?;
    answers[2].ok()?;
    answers[3].refused(404, "not-found")?;
    Ok(())
}

// ---------------------------------------------------------------- §8 writes that cannot act

async fn write_request_id_rule_400(g: G) -> R {
    let c = g.c();
    let (path, base) = write_route(&g).ok_or("no write capability is on")?;
    let mut wrong = Vec::new();
    for bad in [
        Value::Null,
        json!("has space"),
        json!("a/b"),
        json!("q?"),
        json!("h#"),
        json!(""),
        json!("x".repeat(wire::ID_MAX + 1)),
        json!(7),
    ] {
        let mut body = base.clone();
        if !bad.is_null() {
            body["requestId"] = bad.clone();
        }
        let r = c.post(&path, &body).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("requestId {}: {} {}", cut(&bad), r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "POST {path}: {}", wrong.join("; "));
    Ok(())
}

async fn write_unknown_pane_404(g: G) -> R {
    let c = g.c();
    let p = unknown_pane(&g);
    for (cap, route) in [("send", "send"), ("steer", "steer"), ("abort", "stop")] {
        if g.cap(cap) {
            c.post(&format!("/v1/panes/{p}/{route}"), &json!({"requestId": rid("u"), "text": "x"}))
                .await?
                .refused(404, "not-found")?;
        }
    }
    Ok(())
}

/// Refused whole, never cut to fit: to a pane the agent does not have (the
/// body is checked first, §8), so an agent that would cut it acts on nothing.
async fn send_text_over_64k_400_never_cut(g: G) -> R {
    let c = g.c();
    let p = unknown_pane(&g);
    let body = json!({"requestId": rid("big"), "text": "a".repeat(wire::PHONE_TEXT_MAX + 1)});
    c.post(&format!("/v1/panes/{}/send", crate::link::enc(&p)), &body).await?.refused(400, "bad-request")?;
    Ok(())
}

async fn path_ids_percent_decoded_before_the_id_rule(g: G) -> R {
    let c = g.c();
    let r = c.post("/v1/panes/no%20such/send", &json!({"requestId": rid("w"), "text": "x"})).await?;
    r.refused(400, "bad-request").map_err(|e| format!("pane id `no such` (percent-encoded): {e}"))?;
    Ok(())
}

async fn action_unknown_404(g: G) -> R {
    let c = g.c();
    let (p, actions) = g.actions().into_iter().next().ok_or("no pane declares an action")?;
    let mut unknown = "no-such-action".to_owned();
    while actions.contains(&unknown) {
        unknown.push('x');
    }
    c.post(&format!("/v1/panes/{}/actions/{unknown}", crate::link::enc(&p)), &json!({"requestId": rid("a")}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

async fn starter_unknown_404(g: G) -> R {
    let mut unknown = "no-such-starter".to_owned();
    while g.starters().contains(&unknown) {
        unknown.push('x');
    }
    g.c()
        .post(&format!("/v1/starters/{unknown}"), &json!({"requestId": rid("s")}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

fn json_bytes(v: Value) -> Bytes {
    Bytes::from(v.to_string())
}

async fn answer_malformed_body_400_before_anything_else(g: G) -> R {
    let c = g.c();
    let path = format!("/v1/asks/{}", unknown_ask());
    let hash = "a".repeat(64);
    let bodies: Vec<(&str, Bytes)> = vec![
        ("not JSON", Bytes::from_static(b"not json")),
        ("requestId missing", json_bytes(json!({"answer": {"optionIds": ["yes"]}, "hash": hash}))),
        (
            "requestId breaking the ID rule",
            json_bytes(json!({"requestId": "a b", "answer": {"optionIds": ["yes"]}, "hash": hash})),
        ),
        ("answer missing", json_bytes(json!({"requestId": rid("m"), "hash": hash}))),
        ("answer not an object", json_bytes(json!({"requestId": rid("m"), "answer": "yes", "hash": hash}))),
        (
            "optionIds not a list",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": "yes"}, "hash": hash})),
        ),
        (
            "optionIds not strings",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": [1]}, "hash": hash})),
        ),
        (
            "hash null",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": null})),
        ),
        (
            "hash not 64 hex",
            json_bytes(json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": "abc"})),
        ),
        (
            "confirmAlways not a bool",
            json_bytes(
                json!({"requestId": rid("m"), "answer": {"optionIds": ["yes"]}, "hash": hash, "confirmAlways": "yes"}),
            ),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, body) in bodies {
        let r = c.post_raw(&path, body).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("{what}: {} {}", r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "malformed answers to an unknown ask must be 400 first: {}", wrong.join("; "));
    Ok(())
}

async fn answer_unknown_ask_with_hash_202_held(g: G) -> R {
    let c = g.c();
    let id = unknown_ask();
    let request_id = rid("held");
    let r = post_answer(&c, &id, &request_id, json!({"optionIds": ["yes"]}), Some(&"b".repeat(64))).await?;
    let body = r.ok_with(202)?;
    ensure!(body["result"] == "held", "result {} (expected held)", body["result"]);
    ensure!(body["requestId"] == request_id.as_str(), "requestId {}", body["requestId"]);
    let again = post_answer(&c, &id, &request_id, json!({"text": "other"}), None).await?;
    let body = again.ok_with(202)?;
    ensure!(body["result"] == "held", "repeat of a held request id: result {}", body["result"]);
    Ok(())
}

async fn answer_unknown_ask_without_hash_404(g: G) -> R {
    post_answer(&g.c(), &unknown_ask(), &rid("nohash"), json!({"optionIds": ["yes"]}), None)
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

async fn caps_off_routes_not_supported(g: G) -> R {
    let c = g.c();
    let pane = crate::link::enc(&g.panes().into_iter().next().unwrap_or_else(|| "p".to_owned()));
    let mut wrong = Vec::new();
    let routes: Vec<(&str, Method, String, Value)> = vec![
        (
            "asks",
            Method::POST,
            format!("/v1/asks/{}", unknown_ask()),
            json!({"answer": {"optionIds": ["x"]}}),
        ),
        ("send", Method::POST, format!("/v1/panes/{pane}/send"), json!({"text": "x"})),
        ("steer", Method::POST, format!("/v1/panes/{pane}/steer"), json!({"text": "x"})),
        ("abort", Method::POST, format!("/v1/panes/{pane}/stop"), json!({})),
        ("actions", Method::POST, format!("/v1/panes/{pane}/actions/x"), json!({})),
        ("rename", Method::POST, "/v1/rename".into(), json!({"target": "pane", "id": "x", "title": "x"})),
        ("close", Method::POST, "/v1/close".into(), json!({"target": "pane", "id": "x"})),
        ("reopen", Method::POST, "/v1/reopen".into(), json!({"id": "x"})),
        ("starters", Method::POST, "/v1/starters/x".into(), json!({})),
        ("history", Method::GET, "/v1/history".into(), Value::Null),
        ("history", Method::GET, "/v1/history/x".into(), Value::Null),
    ];
    let mut tried = 0;
    for (cap, method, path, mut body) in routes {
        if g.cap(cap) {
            continue;
        }
        tried += 1;
        let r = if method == Method::GET {
            c.get(&path).await?
        } else {
            body["requestId"] = json!(rid("c"));
            c.post(&path, &body).await?
        };
        if let Err(why) = r.refused(409, "not-supported") {
            wrong.push(format!("{cap} off: {why}"));
        }
        // The capability is checked before the body.
        if method == Method::POST {
            let r = c.post_raw(&path, Bytes::from_static(b"not json")).await?;
            if let Err(why) = r.refused(409, "not-supported") {
                wrong.push(format!("{cap} off, capability before body: {why}"));
            }
        }
    }
    ensure!(tried > 0, "every capability with a route is on: nothing to check");
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

// ---------------------------------------------------------------- §10 history

fn is_cursor(s: &str) -> bool {
    (1..=wire::CURSOR_MAX).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

async fn pages(c: &Client, base: &str, list: &str, limit: usize) -> R<(Vec<Value>, usize)> {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut after: Option<String> = None;
    let mut all = Vec::new();
    for page in 1..=500 {
        let path = match &after {
            None => format!("{base}{sep}limit={limit}"),
            Some(cursor) => format!("{base}{sep}limit={limit}&after={}", crate::link::enc(cursor)),
        };
        let r = c.get(&path).await?;
        let body = r.ok()?;
        let got = arr_of(body, list)?;
        ensure!(got.len() <= limit, "{path}: {} {list} for limit {limit}", got.len());
        all.extend(got.iter().cloned());
        match body.get("next") {
            None | Some(Value::Null) => return Ok((all, page)),
            Some(next) => {
                let next = next.as_str().ok_or_else(|| format!("`next` is {next}, not a cursor string"))?;
                ensure!(is_cursor(next), "`next` {next:?} breaks the cursor rule");
                after = Some(next.to_owned());
            }
        }
    }
    Err(format!("{base}: more than 500 pages"))
}

/// The first session the history lists, if any.
async fn a_session(c: &Client) -> R<Option<String>> {
    let r = c.get("/v1/history?limit=1").await?;
    Ok(arr_of(r.ok()?, "rows")?.first().and_then(|row| row["id"].as_str()).map(str::to_owned))
}

async fn history_rows_page_with_cursors(g: G) -> R {
    let c = g.c();
    let (whole, _) = pages(&c, "/v1/history", "rows", wire::HISTORY_LIMIT_MAX).await?;
    for row in &whole {
        str_of(row, "id")?;
        str_of(row, "title")?;
        time_of(row, "startedAt")?;
        ensure!(row["state"] == "open" || row["state"] == "closed", "row state {}", row["state"]);
        ensure!(row["items"].is_u64(), "row items {} is not a count", row["items"]);
    }
    if whole.len() >= 2 {
        let (paged, count) = pages(&c, "/v1/history", "rows", 1).await?;
        ensure!(count >= 2, "limit=1 over {} rows gave {count} page(s): `next` never appeared", whole.len());
        let row_ids = |rows: &[Value]| rows.iter().map(|r| r["id"].to_string()).collect::<Vec<_>>();
        ensure!(
            row_ids(&paged) == row_ids(&whole),
            "paging by 1 gave {:?}, one page gave {:?}",
            row_ids(&paged),
            row_ids(&whole)
        );
    }
    if let Some(first) = whole.first() {
        let id = str_of(first, "id")?;
        let base = format!("/v1/history/{}", crate::link::enc(id));
        let r = c.get(&base).await?;
        let body = r.ok()?;
        ensure!(body["row"]["id"] == id, "{base}: row {}", cut(&body["row"]));
        bool_of(body, "dropped")?;
        let (items, _) = pages(&c, &base, "items", wire::HISTORY_LIMIT_MAX).await?;
        for item in &items {
            ensure!(item["id"].is_string() && item["kind"].is_string(), "history item {}", cut(item));
        }
        if items.len() >= 2 {
            let (paged, count) = pages(&c, &base, "items", 1).await?;
            ensure!(count >= 2, "limit=1 over {} items gave {count} page(s)", items.len());
            let item_ids = |items: &[Value]| items.iter().map(|i| i["id"].to_string()).collect::<Vec<_>>();
            ensure!(item_ids(&paged) == item_ids(&items), "paging {base} by 1 differs from one page");
        }
    }
    Ok(())
}

async fn history_limit_outside_1_to_200_is_400(g: G) -> R {
    let c = g.c();
    let mut wrong = Vec::new();
    let over = (wire::HISTORY_LIMIT_MAX + 1).to_string();
    for limit in ["0", over.as_str(), "-1", "abc", ""] {
        let r = c.get(&format!("/v1/history?limit={limit}")).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("limit={limit}: {} {}", r.status, r.body_text()));
        }
    }
    for limit in [1, wire::HISTORY_LIMIT_MAX] {
        c.get(&format!("/v1/history?limit={limit}")).await?.ok()?;
    }
    if let Some(session) = a_session(&c).await? {
        let r = c.get(&format!("/v1/history/{}?limit={over}", crate::link::enc(&session))).await?;
        if r.refused(400, "bad-request").is_err() {
            wrong.push(format!("session limit={over}: {} {}", r.status, r.body_text()));
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

async fn history_cursor_rule_400(g: G) -> R {
    let c = g.c();
    let mut wrong = Vec::new();
    let long = "a".repeat(wire::CURSOR_MAX + 1);
    let mut bases = vec!["/v1/history".to_owned()];
    if let Some(session) = a_session(&c).await? {
        bases.push(format!("/v1/history/{}", crate::link::enc(&session)));
    }
    for after in ["", "%20", "a%20b", "%01", "%C3%A9", long.as_str()] {
        for base in &bases {
            let r = c.get(&format!("{base}?after={after}")).await?;
            if r.refused(400, "bad-request").is_err() {
                wrong.push(format!(
                    "{base}?after={}: {} {}",
                    &after[..after.len().min(12)],
                    r.status,
                    r.body_text()
                ));
            }
        }
    }
    ensure!(wrong.is_empty(), "{}", wrong.join("; "));
    Ok(())
}

async fn history_unknown_session_404(g: G) -> R {
    let c = g.c();
    c.get("/v1/history/no-such-session-conformance").await?.refused(404, "not-found")?;
    c.get("/v1/history/bad%20id").await?.refused(400, "bad-request")?;
    Ok(())
}

// ---------------------------------------------------------------- §1.2 tokens, §1.1 the socket

fn token_refused(r: &Resp) -> R {
    r.refused(401, "token-refused")?;
    let extra: Vec<&String> = r
        .json
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| !["ok", "code", "message"].contains(&k.as_str()))
        .collect();
    ensure!(extra.is_empty(), "401 carries more than ok/code/message: {extra:?}");
    ensure!(
        r.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")),
        "401 without WWW-Authenticate: Bearer ({:?})",
        r.header("www-authenticate")
    );
    Ok(())
}

async fn token_missing_401_token_refused(g: G) -> R {
    let c = g.c();
    for path in ["/hello", "/v1/state", "/v1/nope"] {
        let r = c.request(Method::GET, path, None, &[], Auth::Missing).await?;
        token_refused(&r).map_err(|e| format!("no token, {path}: {e}"))?;
    }
    let r = c
        .request(Method::GET, "/hello", None, &[("authorization", "Basic Zm9vOmJhcg==")], Auth::Missing)
        .await?;
    token_refused(&r).map_err(|e| format!("Basic auth: {e}"))
}

async fn token_wrong_401_and_nothing_runs(g: G) -> R {
    let c = g.c();
    let wrong = "0".repeat(64);
    token_refused(&c.request(Method::GET, "/hello", None, &[], Auth::Bearer(wrong.clone())).await?)?;
    if let Some(token) = &g.token {
        let mut off = token.clone();
        let last = off.pop();
        off.push(if last == Some('x') { 'y' } else { 'x' });
        token_refused(&c.request(Method::GET, "/hello", None, &[], Auth::Bearer(off)).await?)
            .map_err(|e| format!("the token off by its last byte: {e}"))?;
    }
    // A write with a wrong token runs nothing: the title is not the one it sent.
    let p = g.panes().into_iter().next().unwrap_or_else(|| "p".to_owned());
    let body =
        json!({"requestId": rid("t"), "target": "pane", "id": p, "title": "Not allowed (conformance)"});
    let r = c.request(Method::POST, "/v1/rename", Some(json_bytes(body)), &[], Auth::Bearer(wrong)).await?;
    token_refused(&r)?;
    let after = c.get("/v1/state").await?;
    let title = pane_in(&after.json, &p).map(|x| x["title"].clone()).unwrap_or_default();
    ensure!(title != "Not allowed (conformance)", "a write with a wrong token ran");
    Ok(())
}

async fn token_401_closes_the_connection(g: G) -> R {
    let (r, closed) = g.c().closes_after_first(Auth::Missing).await?;
    token_refused(&r)?;
    ensure!(
        r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")),
        "401 without Connection: close ({:?})",
        r.header("connection")
    );
    ensure!(closed, "the agent answered a second request on the connection after its 401");
    Ok(())
}

async fn token_next_accepted(g: G) -> R {
    let next = g.token_next.clone().ok_or("no COLLIE_TOKEN_NEXT")?;
    let c = g.c();
    c.request(Method::GET, "/hello", None, &[], Auth::Bearer(next.clone()))
        .await?
        .ok()
        .map_err(|e| format!("COLLIE_TOKEN_NEXT: {e}"))?;
    c.request(Method::GET, "/v1/state", None, &[], Auth::Bearer(next)).await?.ok()?;
    Ok(())
}

async fn token_never_in_the_agent_output(g: G) -> R {
    let agent = g.agent.as_ref().ok_or("no --agent-cmd")?;
    let agent = agent.lock().await;
    let (stdout, stderr) = (agent.stdout.text(), agent.stderr.text());
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        for (which, token) in [("COLLIE_TOKEN", &g.token), ("COLLIE_TOKEN_NEXT", &g.token_next)] {
            if let Some(token) = token {
                ensure!(!text.contains(token.as_str()), "the agent's {name} contains {which}");
            }
        }
    }
    Ok(())
}

#[cfg(not(unix))]
async fn socket_and_its_folder_are_private(g: G) -> R {
    Err(format!("{:?}: the private socket is Unix-only", g.socket))
}

#[cfg(unix)]
async fn socket_and_its_folder_are_private(g: G) -> R {
    let socket = g.socket.clone().ok_or("no socket path")?;
    let meta = std::fs::metadata(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    ensure!(meta.file_type().is_socket(), "{} is not a socket", socket.display());
    let m = meta.permissions().mode() & 0o777;
    ensure!(m & 0o077 == 0, "the socket has mode {m:o}: group/other bits set");
    let dir = socket.parent().ok_or("a socket without a folder")?;
    let d =
        std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?.permissions().mode() & 0o777;
    ensure!(d & 0o077 == 0, "the socket's folder {} has mode {d:o}: group/other bits set", dir.display());
    Ok(())
}

// ---------------------------------------------------------------- --writes

async fn send_sent_then_user_item_and_idle(g: G) -> R {
    let c = g.c();
    let (p, request_id, _, body) = send_somewhere(&c, &g, "conformance: hello").await?;
    let result = body["result"].as_str().unwrap_or("");
    ensure!(result == "sent" || result == "queued", "result {} (expected sent or queued)", body["result"]);
    ensure!(body["requestId"] == request_id.as_str(), "requestId {}", body["requestId"]);
    ensure!(body["replayed"] == false, "replayed {} on a first send", body["replayed"]);
    ensure!(body.get("turnId").is_some(), "a send answer lacks turnId");
    let user = wait_for("the user item of the send", Duration::from_secs(10), || async {
        let events = events_after(&c, &p, 0).await.unwrap_or_default();
        let view = if events.is_empty() {
            let r = c.get(&format!("/v1/panes/{}/events?after=0", crate::link::enc(&p))).await?;
            r.json["items"].as_array().cloned().unwrap_or_default()
        } else {
            events.iter().filter_map(|e| e.get("item").cloned()).collect()
        };
        Ok(view.into_iter().find(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()))
    })
    .await?;
    ensure!(user["text"] == "conformance: hello", "user item text {}", user["text"]);
    wait_idle(&c, &p).await?;
    Ok(())
}

async fn receipt_replayed_same_status_and_body(g: G) -> R {
    let c = g.c();
    let (p, request_id, body, first) = send_somewhere(&c, &g, "conformance: only once").await?;
    let path = format!("/v1/panes/{}/send", crate::link::enc(&p));
    expect_replay(&c, &path, &body, &first).await?;
    wait_idle(&c, &p).await?;
    expect_replay(&c, &path, &body, &first).await?;
    let users = items_after(&c, &p, 0).await.unwrap_or_default();
    let n = users.iter().filter(|i| kind_is(i, "user") && i["requestId"] == request_id.as_str()).count();
    ensure!(n <= 1, "a replayed send was delivered again: {n} user items name {request_id}");
    Ok(())
}

async fn receipt_found_by_request_id_whatever_the_route(g: G) -> R {
    let c = g.c();
    let (p, request_id, _, first) = send_somewhere(&c, &g, "conformance: one id, one action").await?;
    wait_idle(&c, &p).await?;
    // The same request id on another route (a stop): the send's receipt, replayed.
    let r = c
        .post(&format!("/v1/panes/{}/stop", crate::link::enc(&p)), &json!({"requestId": request_id}))
        .await?;
    let got = r.ok()?;
    ensure!(
        *got == replayed(&first),
        "the send's id on /stop: {} (expected the send's receipt {})",
        cut(got),
        cut(&first)
    );
    Ok(())
}

async fn steer_idle_pane_409_refused_not_working(g: G) -> R {
    let c = g.c();
    let (p, _, _, _) = send_somewhere(&c, &g, "conformance: then idle").await?;
    wait_idle(&c, &p).await?;
    let before = mark(&c, &p).await?;
    let body = json!({"requestId": rid("steer"), "text": "nobody listens"});
    let r = c.post(&format!("/v1/panes/{}/steer", crate::link::enc(&p)), &body).await?;
    if r.status == 200 {
        // Fine only if a turn began meanwhile, on its own: the pane's events
        // say so (a `state` event `working`), or it is working now.
        let began = events_after(&c, &p, before)
            .await?
            .iter()
            .any(|e| e["type"] == "state" && e["state"] == "working");
        let working = pane_now(&c, &p).await?["state"] == "working";
        ensure!(began || working, "a steer to an idle pane was accepted: {}", cut(&r.json));
        return Ok(());
    }
    let refused = r.refused(409, "refused")?;
    ensure!(
        refused["reason"] == "not-working",
        "refused reason {} (expected not-working)",
        refused["reason"]
    );
    Ok(())
}

/// The option a careful phone picks: a decline when there is one, else the first.
fn decline(ask: &Value) -> Value {
    let options = ids(ask["options"].as_array().map(Vec::as_slice).unwrap_or(&[]));
    let pick = ["deny", "no", "decline", "reject", "cancel", "skip"]
        .iter()
        .find_map(|d| options.iter().find(|o| o.eq_ignore_ascii_case(d)))
        .or_else(|| options.first())
        .cloned()
        .unwrap_or_default();
    match ask["kind"].as_str() {
        Some("text") => json!({"text": "conformance"}),
        Some("form") => {
            let mut values = serde_json::Map::new();
            for f in ask["fields"].as_array().into_iter().flatten() {
                if f["required"] != true {
                    continue;
                }
                let id = f["id"].as_str().unwrap_or_default().to_owned();
                let value = match f["type"].as_str() {
                    Some("number") => f.get("min").cloned().unwrap_or(json!(0)),
                    Some("bool") => json!(false),
                    Some("select") => f["options"][0]["id"].clone(),
                    _ => json!("conformance"),
                };
                values.insert(id, value);
            }
            json!({"values": values})
        }
        _ => json!({"optionIds": [pick]}),
    }
}

/// Answers one open card as a careful phone would and checks what follows.
async fn answer_card(c: &Client, ask: &Value) -> R {
    check_card(ask)?;
    let id = str_of(ask, "id")?;
    let pane = str_of(ask, "pane")?;
    let hash = str_of(ask, "hash")?;
    let m = u64_of(&pane_now(c, pane).await?, "lastSeq")?;
    let request_id = rid("answer");
    let answer = decline(ask);
    let r = post_answer(c, id, &request_id, answer.clone(), Some(hash)).await?;
    if r.status == 409 && r.json["code"] == "ask-closed" {
        return Ok(()); // it closed meanwhile (an expiry, the program)
    }
    let first = r.ok().map_err(|e| format!("answering {} with {answer}: {e}", cut(ask)))?.clone();
    check_answered(&first, id, &request_id, false)?;
    let closed = wait_for(&format!("an ask-closed event for {id}"), Duration::from_secs(10), || async {
        Ok(events_after(c, pane, m)
            .await?
            .into_iter()
            .find(|e| e["type"] == "ask-closed" && e["askId"] == id))
    })
    .await?;
    ensure!(
        closed["decidedBy"] == "phone" && closed["outcome"] == "answered",
        "ask-closed event {}",
        cut(&closed)
    );
    // The receipt, replayed; a second request id finds the card closed.
    let again = post_answer(c, id, &request_id, answer.clone(), Some(hash)).await?;
    ensure!(*again.ok()? == replayed(&first), "the answer's replay: {}", again.body_text());
    let second = post_answer(c, id, &rid("second"), answer, Some(hash)).await?;
    let body = second.refused(409, "ask-closed")?;
    ensure!(body["decidedBy"] == "phone", "ask-closed decidedBy {} (expected phone)", body["decidedBy"]);
    let s = state(c).await?;
    ensure!(!ids(&open_asks(&s)).contains(&id.to_owned()), "the answered ask {id} is still open");
    Ok(())
}

async fn actions_declared_are_done(g: G) -> R {
    let c = g.c();
    for (p, actions) in g.actions() {
        for action in actions {
            let before = ids(&open_asks(&state(&c).await?));
            let request_id = rid("action");
            let path = format!("/v1/panes/{}/actions/{}", crate::link::enc(&p), crate::link::enc(&action));
            let body = json!({"requestId": request_id});
            let r = c.post(&path, &body).await?;
            if r.status == 409 && r.json["code"] == "refused" {
                continue; // the program may refuse now, with its reason
            }
            let first = r.ok().map_err(|e| format!("{p}/{action}: {e}"))?.clone();
            check_write(&first, "done", &request_id)?;
            expect_replay(&c, &path, &body, &first).await?;
            // The cards it raised (within 2 s), answered as a careful phone would.
            let is_new = |a: &Value| {
                a["pane"] == p.as_str() && !before.contains(&a["id"].as_str().unwrap_or("").to_owned())
            };
            let raised = wait_for("a card", Duration::from_secs(2), || async {
                let asks: Vec<Value> = open_asks(&state(&c).await?).into_iter().filter(is_new).collect();
                Ok((!asks.is_empty()).then_some(asks))
            })
            .await
            .unwrap_or_default();
            for ask in raised {
                answer_card(&c, &ask).await?;
            }
        }
    }
    Ok(())
}

async fn asks_raised_are_answered_once(g: G) -> R {
    let c = g.c();
    let asks = open_asks(&state(&c).await?);
    for ask in &asks {
        answer_card(&c, ask).await?;
    }
    Ok(())
}

async fn starters_declared_start(g: G) -> R {
    let c = g.c();
    for starter in g.starters() {
        let request_id = rid("start");
        let path = format!("/v1/starters/{}", crate::link::enc(&starter));
        let body = json!({"requestId": request_id, "text": "conformance"});
        let r = c.post(&path, &body).await?;
        if r.status == 409 && r.json["code"] == "refused" {
            continue;
        }
        let first = r.ok().map_err(|e| format!("starter {starter}: {e}"))?.clone();
        check_write(&first, "started", &request_id)?;
        ensure!(first["pane"].is_string() || first["pane"].is_null(), "started pane {}", first["pane"]);
        if let Some(p) = first["pane"].as_str() {
            let s = state(&c).await?;
            ensure!(pane_in(&s, p).is_some(), "the started pane {p} is not in the state");
        }
        expect_replay(&c, &path, &body, &first).await?;
    }
    Ok(())
}

async fn rename_pane_renamed(g: G) -> R {
    let c = g.c();
    let p = g.first_pane()?;
    let title = pane_now(&c, &p).await?["title"].as_str().unwrap_or(&p).to_owned();
    // A request id of exactly ID_MAX bytes is within the rule, and an
    // unknown field rides along (forward compatibility).
    let request_id = format!("{:y<width$}", rid("rename"), width = wire::ID_MAX);
    let body = json!({"requestId": request_id, "target": "pane", "id": p, "title": title,
                      "fromTheFuture": {"anything": [1, 2]}});
    let first = c.post("/v1/rename", &body).await?.ok()?.clone();
    check_write(&first, "renamed", &request_id)?;
    expect_replay(&c, "/v1/rename", &body, &first).await?;
    let body = json!({"requestId": rid("rename"), "target": "pane", "id": unknown_pane(&g), "title": "x"});
    c.post("/v1/rename", &body).await?.refused(404, "not-found")?;
    let body = json!({"requestId": rid("rename"), "target": "window", "id": p, "title": "x"});
    c.post("/v1/rename", &body).await?.refused(400, "bad-request")?;
    Ok(())
}

async fn close_and_reopen_pane(g: G) -> R {
    let c = g.c();
    // The last pane: a started one when a starter ran, the least central otherwise.
    let s = state(&c).await?;
    let p = ids(arr_of(&s, "panes")?).pop().ok_or("no pane to close")?;
    let seq0 = u64_of(&s, "seq")?;
    let request_id = rid("close");
    let r = c.post("/v1/close", &json!({"requestId": request_id, "target": "pane", "id": p})).await?;
    if r.status == 409 && r.json["code"] == "refused" {
        return Ok(());
    }
    check_write(r.ok()?, "closed", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_none(), "closed pane {p} is still in panes");
    ensure!(ids(arr_of(&s, "closed")?).contains(&p), "{p} is not in the closed list {}", cut(&s["closed"]));
    let d = c.get(&format!("/v1/state?since={seq0}")).await?;
    let d = d.ok()?;
    ensure!(
        d["full"] == true || d["removed"].as_array().is_some_and(|r| r.contains(&json!(p))),
        "since answer removed {} lacks {p}",
        d["removed"]
    );
    let request_id = rid("reopen");
    let r = c.post("/v1/reopen", &json!({"requestId": request_id, "id": p})).await?;
    check_write(r.ok()?, "reopened", &request_id)?;
    let s = state(&c).await?;
    ensure!(pane_in(&s, &p).is_some(), "reopened pane {p} is not in panes");
    ensure!(!ids(arr_of(&s, "closed")?).contains(&p), "reopened pane {p} is still in the closed list");
    c.post("/v1/reopen", &json!({"requestId": rid("reopen"), "id": unknown_pane(&g)}))
        .await?
        .refused(404, "not-found")?;
    Ok(())
}

// ---------------------------------------------------------------- --agent-cmd

async fn epoch_changes_when_the_agent_restarts(g: G) -> R {
    let before = g.c().get("/hello").await?.ok()?["epoch"].clone();
    g.restart().await?;
    let after = g.c().get("/hello").await?.ok()?["epoch"].clone();
    ensure!(before != after, "the epoch {before} is the same after a restart");
    Ok(())
}

async fn receipts_replayed_after_sigkill_restart(g: G) -> R {
    let (path, mut body) = write_that_acts(&g).ok_or("no write to repeat")?;
    body["requestId"] = json!(rid("kept"));
    let c = g.c();
    let first = c.post(&path, &body).await?.ok()?.clone();
    if path.ends_with("/send") {
        // Let the turn begin before the kill: the receipt is what is checked.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    g.restart().await?;
    let c = g.c();
    expect_replay(&c, &path, &body, &first).await
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

    #[test]
    fn a_careful_phone_declines_when_it_can() {
        let ask = json!({"kind": "choice", "options": [{"id": "allow"}, {"id": "deny"}]});
        assert_eq!(decline(&ask), json!({"optionIds": ["deny"]}));
        let ask = json!({"kind": "choice", "options": [{"id": "red"}, {"id": "blue"}]});
        assert_eq!(decline(&ask), json!({"optionIds": ["red"]}));
        let ask = json!({"kind": "form", "fields": [{"id": "n", "type": "number", "required": true, "min": 2},
                                                     {"id": "s", "type": "text"}]});
        assert_eq!(decline(&ask), json!({"values": {"n": 2}}));
    }
}
