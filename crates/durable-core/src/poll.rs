//! The read routes: `GET`/`POST /hello` (§3), the state poll (§5) and a
//! pane's events (§6).

use std::collections::HashMap;

use durable_types::exchange::{Caller, Response, Tag};
use durable_types::{
    CapsView, ErrorCode, HelloPostResponse, HelloRequest, HelloResponse, Id, SDK_NAME, SDK_VERSION,
    STATE_SEQ_MEMORY, SdkInfo, WireRange,
};

use crate::machine::Machine;
use crate::request::Query;
use crate::respond;

pub fn hello(m: &Machine, caller: Caller) -> Response {
    // A core served on a socket and over HTTPS at once: each transport says
    // its own check (a request that came with a token is HTTPS).
    let caller_check = if caller == Caller::Token {
        crate::data::caller_check::CallerCheckMode::Token
    } else {
        m.caller_check()
    };
    let ready = m.state.is_ready();
    let opts = &m.config;
    respond::json(
        200,
        &HelloResponse {
            ok: true,
            wire: WireRange::SDK,
            sdk: SdkInfo { name: SDK_NAME.into(), version: SDK_VERSION.into() },
            host: opts.host_name.clone(),
            runtime: opts.runtime.clone(),
            ready,
            epoch: opts.epoch.clone(),
            caller_check: caller_check.as_str().into(),
            caps: CapsView::from(m.caps()),
        },
    )
}

/// Collie announces itself: an `INFO` event the first time each Collie
/// version does in this process (the first thing to look for when the phone
/// does not show the agent); a version range that does not overlap ours is
/// written through the warn sink once per Collie version.
pub fn hello_post(m: &mut Machine, hello: HelloRequest) -> Response {
    let compatible = WireRange::SDK.overlaps(hello.wire);
    // Bounded and one line: the version string comes from the network.
    let version: String = match &hello.collie {
        Some(c) => c.version.chars().filter(|c| !c.is_control()).take(64).collect(),
        None => "unknown".to_owned(),
    };
    if tracing::enabled!(tracing::Level::INFO) && m.state.first_hello_from(&version) {
        tracing::info!(
            collie_version = %version,
            collie_wire = %hello.wire.label(),
            compatible,
            "Collie said hello"
        );
    }
    if !compatible {
        let first = m.state.first_warning_for(version);
        if first {
            m.warn(format!(
                "collie: Collie speaks wire {}, this durable agent speaks {}. Update the agent's SDK, or Collie.",
                hello.wire.label(),
                WireRange::SDK.label()
            ));
        }
    }
    respond::json(200, &HelloPostResponse { ok: true, wire: WireRange::SDK, compatible })
}

/// `GET /v1/state[?since=N]`, with the `ETag` and `304`.
pub fn state(
    m: &mut Machine,
    query: Option<&str>,
    if_none_match: Option<&str>,
) -> Result<Response, Response> {
    let since = Query::parse(query).u64("since")?;
    let epoch = &m.config.epoch;
    let st = &mut m.state;
    let seq = st.seq();
    let etag = st.etag(epoch);
    if if_none_match.is_some_and(|v| matches_tag(v, &etag)) {
        let mut resp = Response::json(304, bytes::Bytes::new());
        resp.etag = Some(etag);
        return Ok(resp);
    }
    let full = match since {
        None | Some(0) => true,
        Some(n) => n > seq || seq - n > STATE_SEQ_MEMORY,
    };
    // Between changes every poll of the same kind gets the same bytes, shared.
    let kept = if full { st.full_answer() } else { st.delta_answer(since.unwrap_or(0)) };
    if let Some(body) = kept {
        return Ok(answer(body, etag));
    }
    if !full {
        st.refresh_layout_order();
    }
    let n = since.unwrap_or(0);
    // Open asks by pane, oldest first, gathered once (not once per pane).
    let asks = st.shown_asks_in_order();
    let mut open_asks: HashMap<&Id, Vec<&str>> = HashMap::new();
    for a in &asks {
        open_asks.entry(&a.pane).or_default().push(&a.id);
    }
    let panes = if full { st.panes_in_layout_order().collect() } else { st.panes_changed_since(n) };
    let layout = full || st.layout_seq() > n;
    let body = StateAnswer {
        ok: true,
        epoch,
        seq,
        ready: st.is_ready(),
        full,
        workspaces: layout.then(|| st.workspaces_view()),
        panes: PaneViews { panes, open_asks: &open_asks, has_history: st.has_history() },
        removed: if full { Vec::new() } else { st.removed_since(n) },
        closed: layout.then(|| st.closed_views()),
        starters: layout.then(|| st.starters()),
        asks: &asks,
    };
    let mut resp = if full {
        // About the last one's size, with room for a little growth.
        let last = st.full_answer_len();
        respond::json_with_capacity(200, &body, last + last / 8)
    } else {
        respond::json(200, &body)
    };
    if resp.status == 200 {
        if full {
            st.keep_full_answer(resp.body.clone());
        } else {
            st.keep_delta_answer(n, resp.body.clone());
        }
    }
    resp.etag = Some(etag);
    Ok(resp)
}

/// [`state`] through `&self`, from what an earlier poll kept: the `304` of
/// the current tag, or the bytes of a full or delta answer kept at the
/// current seq — what polls between two changes read. `None`: the answer
/// is to be made ([`state`]).
pub fn state_kept(
    m: &Machine,
    query: Option<&str>,
    if_none_match: Option<&str>,
) -> Option<Result<Response, Response>> {
    let since = match Query::parse(query).u64("since") {
        Ok(since) => since,
        Err(e) => return Some(Err(e.into())),
    };
    let st = &m.state;
    let etag = st.kept_etag()?;
    if if_none_match.is_some_and(|v| matches_tag(v, &etag)) {
        let mut resp = Response::json(304, bytes::Bytes::new());
        resp.etag = Some(etag);
        return Some(Ok(resp));
    }
    let seq = st.seq();
    let full = match since {
        None | Some(0) => true,
        Some(n) => n > seq || seq - n > STATE_SEQ_MEMORY,
    };
    let kept = if full { st.full_answer() } else { st.delta_answer(since.unwrap_or(0)) };
    kept.map(|body| Ok(answer(body, etag)))
}

/// `durable_types::StateResponse` borrowing the core's state: each pane is
/// written into the answer from the core's own data (`PaneViews`), not
/// first copied into a `PaneView`. At 10,000 panes those copies took 2.3 MB
/// of views and 0.5 MB of strings for as long as the answer was written, a
/// peak the allocator then kept: about 3 MiB of the agent's resident memory.
#[derive(serde::Serialize)]
struct StateAnswer<'a> {
    ok: bool,
    epoch: &'a str,
    seq: u64,
    ready: bool,
    full: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspaces: Option<Vec<durable_types::WorkspaceView>>,
    panes: PaneViews<'a>,
    removed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closed: Option<Vec<durable_types::ClosedView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    starters: Option<&'a [durable_types::StarterView]>,
    asks: &'a [&'a durable_types::Ask],
}

/// The panes of a state answer, each written as it comes.
struct PaneViews<'a> {
    panes: Vec<&'a crate::state::PaneData>,
    open_asks: &'a HashMap<&'a Id, Vec<&'a str>>,
    has_history: bool,
}

impl serde::Serialize for PaneViews<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.panes.iter().map(|p| {
            let open_asks = self.open_asks.get(p.id()).map_or(&[][..], Vec::as_slice);
            p.view_ref(self.has_history, open_asks)
        }))
    }
}

/// Whether an `If-None-Match` value names `tag`: the tag itself (what
/// Collie sends back, checked first), or a list holding it or `*`.
fn matches_tag(if_none_match: &str, tag: &Tag) -> bool {
    *tag == if_none_match || if_none_match.split(',').any(|t| *tag == t.trim() || t.trim() == "*")
}

/// A state answer: its bytes and its tag.
fn answer(body: bytes::Bytes, etag: Tag) -> Response {
    let mut resp = Response::json(200, body);
    resp.etag = Some(etag);
    resp
}

/// `durable_types::PaneSnapshot` borrowing the pane's view.
#[derive(serde::Serialize)]
struct PaneSnapshotRef<'a> {
    ok: bool,
    pane: &'a Id,
    snapshot: bool,
    items: Vec<&'a durable_types::Item>,
    state: durable_types::PaneState,
    #[serde(rename = "turnId")]
    turn_id: Option<&'a str>,
    asks: Vec<durable_types::Ask>,
    next: u64,
    dropped: bool,
}

/// `GET /v1/panes/{pane}/events?after=N`: the tail after `N`, or the
/// pane's view when the reader fell behind (or is ahead: an earlier epoch).
pub fn events(m: &mut Machine, query: Option<&str>, pane: Id) -> Result<Response, Response> {
    let after = Query::parse(query).u64("after")?.unwrap_or(0);
    let st = &mut m.state;
    let Some(p) = st.pane_events_read(&pane) else {
        return Err(respond::no_pane(&pane));
    };
    let behind = after.saturating_add(1) < p.first_retained();
    let ahead = after > p.last_seq();
    if !behind && !ahead {
        // Each event of the tail is encoded once, at its first read.
        let Some((p, bytes)) = st.encode_tail_after(&pane, after) else {
            return Err(respond::no_pane(&pane));
        };
        return tail_page(&pane, p, after, bytes);
    }
    // Readers that fell behind between two changes get the same bytes.
    if let Some(body) = st.snapshot_answer(&pane) {
        return Ok(Response::json(200, body));
    }
    let Some(p) = st.pane(&pane) else {
        return Err(respond::no_pane(&pane));
    };
    let (items, dropped) = p.view_items();
    let snapshot = PaneSnapshotRef {
        ok: true,
        pane: &pane,
        snapshot: true,
        items,
        state: p.shown_state(),
        turn_id: p.shown_turn_id(),
        asks: st.shown_asks_in_order().into_iter().filter(|a| a.pane == pane).cloned().collect(),
        next: p.last_seq(),
        dropped,
    };
    let resp = respond::json(200, &snapshot);
    if resp.status == 200 {
        st.keep_snapshot_answer(&pane, resp.body.clone());
    }
    Ok(resp)
}

/// [`events`] through `&self`, from what earlier reads encoded and kept:
/// the tail after `after` when each of its events is encoded, or the
/// snapshot kept at the current seq. `None`: the page is to be made
/// ([`events`]).
pub fn events_kept(m: &Machine, query: Option<&str>, pane: Id) -> Option<Result<Response, Response>> {
    let after = match Query::parse(query).u64("after") {
        Ok(after) => after.unwrap_or(0),
        Err(e) => return Some(Err(e.into())),
    };
    let st = &m.state;
    let Some(p) = st.pane(&pane) else {
        return Some(Err(respond::no_pane(&pane)));
    };
    if !p.events_were_read() {
        return None;
    }
    let behind = after.saturating_add(1) < p.first_retained();
    let ahead = after > p.last_seq();
    if !behind && !ahead {
        let bytes = p.encoded_tail_len_after(after)?;
        return Some(tail_page(&pane, p, after, bytes));
    }
    st.snapshot_answer(&pane).map(|body| Ok(Response::json(200, body)))
}

/// A page of the tail after `after`, each event encoded (`bytes`, the
/// length of their JSON in all): their bytes between a head and a tail.
/// Sized first, then copied from the tail at once: no clone of each
/// event's bytes to drop again, and no growth by doubling (a page of 300
/// events cost more in reallocations than in copying).
fn tail_page(pane: &Id, p: &crate::state::PaneData, after: u64, bytes: usize) -> Result<Response, Response> {
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(b"{\"ok\":true,\"pane\":");
    serde_json::to_writer(&mut body, pane).map_err(|e| respond::error(ErrorCode::Internal, e.to_string()))?;
    body.extend_from_slice(b",\"snapshot\":false,\"next\":");
    // The events, a comma between two, `next` and the page's end.
    body.reserve(bytes + p.events_after(after).size_hint().0 + 32);
    // The page runs to the end of the tail.
    let next = p.last_seq();
    body.extend_from_slice(next.to_string().as_bytes());
    body.extend_from_slice(b",\"events\":[");
    for (i, e) in p.events_after(after).enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(e.json());
    }
    body.extend_from_slice(b"]}");
    Ok(Response::json(200, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_names_the_tag_alone_in_a_list_or_as_a_star() {
        let tag = Tag::from("\"e-7\"");
        for yes in ["\"e-7\"", "\"x-1\", \"e-7\"", " \"e-7\" ,\"x\"", "*", "\"x\", *"] {
            assert!(matches_tag(yes, &tag), "{yes} names the tag");
        }
        for no in ["", "\"e-70\"", "e-7", "\"x-1\",\"e-8\"", "**", "W/\"e-7\""] {
            assert!(!matches_tag(no, &tag), "{no} does not");
        }
    }
}
