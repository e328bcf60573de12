//! Routing: from a request value to the route that answers it, with the
//! checks every route shares (method, caller, capability), and the reads
//! answered at once. Part of the machine: plain data in, a response out
//! (`dispatch.rs` runs the routes that wait on the program).

use durable_types::exchange::{Caller, Method, Read, Response};
use durable_types::{Cap, ErrorCode};

use crate::machine::Machine;
use crate::request::path_id;
use crate::respond;

/// The routes of wire v1.
#[derive(Clone, Copy, Debug)]
pub enum Route<'a> {
    Hello,
    State,
    Events(&'a str),
    Send(&'a str),
    Steer(&'a str),
    Stop(&'a str),
    Action(&'a str, &'a str),
    Answer(&'a str),
    Rename,
    Close,
    Reopen,
    Starter(&'a str),
    History,
    Conversation(&'a str),
}

impl Route<'_> {
    /// The methods the route takes, for `405` and `Allow`.
    fn allow(&self) -> &'static str {
        match self {
            Route::Hello => "GET, POST",
            Route::State | Route::Events(_) | Route::History | Route::Conversation(_) => "GET",
            _ => "POST",
        }
    }

    fn is_write(&self) -> bool {
        self.allow() == "POST"
    }

    /// The route's name in logs: its path with each id named, not given.
    fn name(&self) -> &'static str {
        match self {
            Route::Hello => "/hello",
            Route::State => "/v1/state",
            Route::Events(_) => "/v1/panes/{pane}/events",
            Route::Send(_) => "/v1/panes/{pane}/send",
            Route::Steer(_) => "/v1/panes/{pane}/steer",
            Route::Stop(_) => "/v1/panes/{pane}/stop",
            Route::Action(..) => "/v1/panes/{pane}/actions/{action}",
            Route::Answer(_) => "/v1/asks/{ask}",
            Route::Rename => "/v1/rename",
            Route::Close => "/v1/close",
            Route::Reopen => "/v1/reopen",
            Route::Starter(_) => "/v1/starters/{starter}",
            Route::History => "/v1/history",
            Route::Conversation(_) => "/v1/history/{session}",
        }
    }

    /// The pane the path names, still percent-encoded.
    fn pane(&self) -> Option<&str> {
        match self {
            Route::Events(p) | Route::Send(p) | Route::Steer(p) | Route::Stop(p) | Route::Action(p, _) => {
                Some(p)
            }
            _ => None,
        }
    }
}

/// The most segments a route has (`/v1/panes/{p}/actions/{a}`).
const MAX_SEGMENTS: usize = 5;

fn parse_route(path: &str) -> Option<Route<'_>> {
    // The poll, every 2 s from each phone that watches: no split at all.
    if path == "/v1/state" {
        return Some(Route::State);
    }
    // Split into a fixed array: routing allocates nothing.
    let mut segs = [""; MAX_SEGMENTS];
    let mut n = 0;
    for seg in path.strip_prefix('/')?.split('/') {
        *segs.get_mut(n)? = seg;
        n += 1;
    }
    Some(match &segs[..n] {
        ["hello"] => Route::Hello,
        ["v1", "state"] => Route::State,
        ["v1", "panes", p, "events"] => Route::Events(p),
        ["v1", "panes", p, "send"] => Route::Send(p),
        ["v1", "panes", p, "steer"] => Route::Steer(p),
        ["v1", "panes", p, "stop"] => Route::Stop(p),
        ["v1", "panes", p, "actions", a] => Route::Action(p, a),
        ["v1", "asks", a] => Route::Answer(a),
        ["v1", "rename"] => Route::Rename,
        ["v1", "close"] => Route::Close,
        ["v1", "reopen"] => Route::Reopen,
        ["v1", "starters", s] => Route::Starter(s),
        ["v1", "history"] => Route::History,
        ["v1", "history", s] => Route::Conversation(s),
        _ => return None,
    })
}

/// An `INFO` event naming the check that refused a caller. The path is
/// written escaped (it comes from the network). `INFO`, not `WARN`: the
/// refusal is the check doing its job (the caller hears its `403`), and a
/// process probing the socket must not fill a log kept for warnings.
fn refused_caller(check: &'static str, method: &Method, path: &str) {
    tracing::info!(check, ?method, path = ?path, "caller refused");
}

/// The span of one request from Collie (`request`): its method and route,
/// and the pane, ask id and request id it names once they pass the ID rule
/// — never a token or a body. A write's span is at `INFO`, so that what an
/// action handler or a hook logs carries it at the usual level; a read's
/// at `DEBUG`: a poll comes every 2 s from each phone that watches, and
/// when its span is off (the subscriber's level, or no subscriber) nothing
/// is parsed or formatted for it.
pub fn request_span(method: &Method, path: &str) -> tracing::Span {
    use tracing::field::Empty;
    let span = match method {
        Method::Get => tracing::debug_span!(
            "request",
            method = "GET",
            route = Empty,
            pane = Empty,
            ask_id = Empty,
            request_id = Empty
        ),
        _ => tracing::info_span!(
            "request",
            method = method_name(method),
            route = Empty,
            pane = Empty,
            ask_id = Empty,
            request_id = Empty
        ),
    };
    if span.is_disabled() {
        return span;
    }
    let route = parse_route(path);
    span.record("route", route.as_ref().map_or("unknown", Route::name));
    let checked = |segment: &str| durable_types::Id::from_path_segment(segment).ok();
    if let Some(pane) = route.as_ref().and_then(Route::pane).and_then(checked) {
        span.record("pane", pane.as_str());
    }
    let ask = match route {
        Some(Route::Answer(ask)) => checked(ask),
        _ => None,
    };
    if let Some(ask) = ask {
        span.record("ask_id", ask.as_str());
    }
    span
}

/// A method as the request span names it (any other method is `other`:
/// its name comes from the network).
fn method_name(method: &Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post => "POST",
        _ => "other",
    }
}

/// The request span's last word: the status answered.
pub fn answered(response: &Response) {
    tracing::debug!(status = response.status, "answered");
}

/// Checks shared by every write, in the contract's order after the route:
/// caller (403), then capability (409).
fn write_gate(m: &Machine, method: &Method, path: &str, caller: Caller, cap: Cap) -> Result<(), Response> {
    if caller == Caller::SelfOrDescendant {
        refused_caller("self-or-descendant", method, path);
        return Err(respond::error(
            ErrorCode::CallerRefused,
            "a write from the agent itself or a process it launched is refused",
        ));
    }
    if !m.caps().has(cap) {
        return Err(respond::error(
            ErrorCode::NotSupported,
            format!("this agent does not declare the {} capability", cap.name()),
        ));
    }
    Ok(())
}

/// The checks every request passes before its route's handler, in the
/// contract's order: another user (403), the route (404), the method (405),
/// then for a write the caller (403) and the capability (409).
pub fn gate<'p>(m: &Machine, method: &Method, path: &'p str, caller: Caller) -> Result<Route<'p>, Response> {
    // Another user id is refused outright (§1.1), before anything about the
    // agent's routes is told.
    if caller == Caller::OtherUser {
        refused_caller("other-user", method, path);
        return Err(respond::error(ErrorCode::CallerRefused, "a connection from another user is refused"));
    }
    let Some(route) = parse_route(path) else {
        return Err(respond::not_found(format!("no route {path}")));
    };
    let method_ok = match (method, &route) {
        (Method::Get, Route::Hello) | (Method::Post, Route::Hello) => true,
        (Method::Get, r) => !r.is_write(),
        (Method::Post, r) => r.is_write(),
        _ => false,
    };
    if !method_ok {
        let mut resp = respond::error(ErrorCode::MethodNotAllowed, format!("{path} takes {}", route.allow()));
        resp.allow = Some(route.allow());
        return Err(resp);
    }
    let cap = match &route {
        Route::Send(_) => Some(Cap::Send),
        Route::Steer(_) => Some(Cap::Steer),
        Route::Stop(_) => Some(Cap::Abort),
        Route::Action(..) => Some(Cap::Actions),
        Route::Answer(_) => Some(Cap::Asks),
        Route::Rename => Some(Cap::Rename),
        Route::Close => Some(Cap::Close),
        Route::Reopen => Some(Cap::Reopen),
        Route::Starter(_) => Some(Cap::Starters),
        _ => None,
    };
    if let Some(cap) = cap {
        write_gate(m, method, path, caller, cap)?;
    }
    Ok(route)
}

impl Machine {
    /// Answers a read at once (`GET /hello`, the state, a pane's events, a
    /// refusal), or `None` for one that must wait: the history routes ask
    /// the program's provider (durable-runtime's `dispatch.rs` answers those). The caller
    /// makes the request's span and tells `answered` (not under its lock).
    pub fn answer_read(&mut self, read: &Read<'_>) -> Option<Response> {
        match gate(self, &Method::Get, read.path, read.caller) {
            Ok(route) => read_now(self, route, read).map(|answered| answered.unwrap_or_else(|resp| resp)),
            Err(refused) => Some(refused),
        }
    }
}

/// A read [`Machine::answer_read_kept`] cannot answer through `&self`:
/// the caller takes the machine for writing and calls
/// [`Machine::answer_read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedsWrite;

impl Machine {
    /// [`answer_read`](Self::answer_read) through `&self`, for the reads
    /// that change nothing: `GET /hello`, a refused caller or route, the
    /// state poll between two changes (its `304`, or the answer kept at
    /// the current seq) and a pane's events already encoded (or its
    /// snapshot kept). Polls between changes, the usual load, then share
    /// the machine with one another. `Err(NeedsWrite)`: the answer is to
    /// be made (and kept), through `&mut self`.
    pub fn answer_read_kept(&self, read: &Read<'_>) -> Result<Option<Response>, NeedsWrite> {
        let route = match gate(self, &Method::Get, read.path, read.caller) {
            Ok(route) => route,
            Err(refused) => return Ok(Some(refused)),
        };
        let kept = match route {
            Route::Hello => return Ok(Some(crate::poll::hello(self, read.caller))),
            Route::State => crate::poll::state_kept(self, read.query, read.if_none_match),
            Route::Events(p) => match path_id(p, "pane") {
                Ok(pane) => crate::poll::events_kept(self, read.query, pane),
                Err(e) => return Ok(Some(Response::from(e))),
            },
            _ => return Ok(None),
        };
        kept.map(|answered| Some(answered.unwrap_or_else(|resp| resp))).ok_or(NeedsWrite)
    }
}

/// The reads answered without waiting: `GET /hello`, the state and a
/// pane's events.
pub fn read_now(m: &mut Machine, route: Route<'_>, read: &Read<'_>) -> Option<Result<Response, Response>> {
    Some(match route {
        Route::Hello => Ok(crate::poll::hello(m, read.caller)),
        Route::State => crate::poll::state(m, read.query, read.if_none_match),
        Route::Events(p) => path_id(p, "pane")
            .map_err(Response::from)
            .and_then(|pane| crate::poll::events(m, read.query, pane)),
        _ => return None,
    })
}
