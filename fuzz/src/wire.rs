//! Structured requests: routes of the contract with ids, queries and JSON
//! bodies chosen by the fuzzer, so that inputs reach past the router and
//! the body rules into the routes themselves. Raw strings and bytes stay
//! possible at every level.

use std::fmt::Write as _;

use arbitrary::Arbitrary;
use bytes::Bytes;
use durable_runtime::types::exchange::{Body, Caller, Method, Request};
use serde_json::{Map, Value, json};

use crate::agent::{KNOWN, ask_ids};

/// Strings the inputs pick from: the agent's ids, then what its answers
/// named (ask ids, hashes, turn ids, cursors, ETags).
#[derive(Debug, Clone)]
pub struct Pool {
    strs: Vec<String>,
}

/// The most strings a pool keeps.
const POOL_MAX: usize = 64;

impl Default for Pool {
    fn default() -> Self {
        let mut strs: Vec<String> = KNOWN.iter().map(|s| (*s).to_owned()).collect();
        strs.extend(ask_ids());
        Pool { strs }
    }
}

impl Pool {
    /// The `i`-th string, wrapping.
    pub fn pick(&self, i: u8) -> &str {
        &self.strs[usize::from(i) % self.strs.len()]
    }

    /// Adds a string seen in an answer.
    pub fn add(&mut self, s: &str) {
        if self.strs.len() < POOL_MAX && !s.is_empty() && !self.strs.iter().any(|k| k == s) {
            self.strs.push(s.to_owned());
        }
    }

    /// Adds the ids, hashes, turn ids and cursors an answer names.
    pub fn harvest(&mut self, body: &[u8]) {
        if let Ok(v) = serde_json::from_slice::<Value>(body) {
            self.walk(&v, 0);
        }
    }

    fn walk(&mut self, v: &Value, depth: usize) {
        if depth > 4 {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("id" | "hash" | "askId" | "turnId" | "next" | "pane", Value::String(s)) => {
                            self.add(s)
                        }
                        _ => self.walk(v, depth + 1),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| self.walk(i, depth + 1)),
            _ => {}
        }
    }
}

/// A path segment.
#[derive(Debug, Clone, Arbitrary)]
pub enum Seg {
    /// A string of the pool.
    Seen(u8),
    /// A string of the pool, every byte percent-encoded.
    Encoded(u8),
    /// Anything.
    Raw(String),
}

impl Seg {
    fn render(&self, pool: &Pool) -> String {
        match self {
            Seg::Seen(i) => pool.pick(*i).to_owned(),
            Seg::Encoded(i) => pool.pick(*i).bytes().fold(String::new(), |mut out, b| {
                let _ = write!(out, "%{b:02X}");
                out
            }),
            Seg::Raw(s) => s.clone(),
        }
    }
}

/// A route of the contract, or any path.
#[derive(Debug, Clone, Arbitrary)]
pub enum PathSel {
    /// `/hello`
    Hello,
    /// `/v1/state`
    State,
    /// `/v1/panes/{p}/events`
    Events(Seg),
    /// `/v1/panes/{p}/send`
    Send(Seg),
    /// `/v1/panes/{p}/steer`
    Steer(Seg),
    /// `/v1/panes/{p}/stop`
    Stop(Seg),
    /// `/v1/panes/{p}/actions/{a}`
    Action(Seg, Seg),
    /// `/v1/asks/{a}`
    Answer(Seg),
    /// `/v1/rename`
    Rename,
    /// `/v1/close`
    Close,
    /// `/v1/reopen`
    Reopen,
    /// `/v1/starters/{s}`
    Starter(Seg),
    /// `/v1/history`
    History,
    /// `/v1/history/{s}`
    Conversation(Seg),
    /// Anything.
    Raw(String),
}

impl PathSel {
    /// The path, still percent-encoded.
    pub fn render(&self, pool: &Pool) -> String {
        match self {
            PathSel::Hello => "/hello".into(),
            PathSel::State => "/v1/state".into(),
            PathSel::Events(p) => format!("/v1/panes/{}/events", p.render(pool)),
            PathSel::Send(p) => format!("/v1/panes/{}/send", p.render(pool)),
            PathSel::Steer(p) => format!("/v1/panes/{}/steer", p.render(pool)),
            PathSel::Stop(p) => format!("/v1/panes/{}/stop", p.render(pool)),
            PathSel::Action(p, a) => format!("/v1/panes/{}/actions/{}", p.render(pool), a.render(pool)),
            PathSel::Answer(a) => format!("/v1/asks/{}", a.render(pool)),
            PathSel::Rename => "/v1/rename".into(),
            PathSel::Close => "/v1/close".into(),
            PathSel::Reopen => "/v1/reopen".into(),
            PathSel::Starter(s) => format!("/v1/starters/{}", s.render(pool)),
            PathSel::History => "/v1/history".into(),
            PathSel::Conversation(s) => format!("/v1/history/{}", s.render(pool)),
            PathSel::Raw(s) => s.clone(),
        }
    }

    /// The method a route takes (`GET` for reads, `POST` for writes).
    pub fn method(&self) -> &'static str {
        match self {
            PathSel::Hello
            | PathSel::State
            | PathSel::Events(_)
            | PathSel::History
            | PathSel::Conversation(_)
            | PathSel::Raw(_) => "GET",
            _ => "POST",
        }
    }
}

/// A query parameter's name.
#[derive(Debug, Clone, Arbitrary)]
pub enum QKey {
    /// `since` (state).
    Since,
    /// `after` (events, history).
    After,
    /// `limit` (history).
    Limit,
    /// Anything.
    Raw(String),
}

/// A query parameter's value.
#[derive(Debug, Clone, Arbitrary)]
pub enum QVal {
    /// No value, and no `=`.
    Absent,
    /// A number.
    Num(u64),
    /// A string of the pool.
    Seen(u8),
    /// Anything.
    Raw(String),
}

fn render_query(q: &[(QKey, QVal)], pool: &Pool) -> String {
    let mut out = String::new();
    for (i, (k, v)) in q.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(match k {
            QKey::Since => "since",
            QKey::After => "after",
            QKey::Limit => "limit",
            QKey::Raw(s) => s,
        });
        if !matches!(v, QVal::Absent) {
            out.push('=');
        }
        match v {
            QVal::Absent => {}
            QVal::Num(n) => {
                let _ = write!(out, "{n}");
            }
            QVal::Seen(i) => out.push_str(pool.pick(*i)),
            QVal::Raw(s) => out.push_str(s),
        }
    }
    out
}

/// A JSON field name of a request body.
#[derive(Debug, Clone, Arbitrary)]
pub enum Key {
    /// `requestId`
    RequestId,
    /// `text`
    Text,
    /// `turnId`
    TurnId,
    /// `answer`
    Answer,
    /// `hash`
    Hash,
    /// `confirmAlways`
    ConfirmAlways,
    /// `target`
    Target,
    /// `id`
    Id,
    /// `title`
    Title,
    /// `wire`
    Wire,
    /// `collie`
    Collie,
    /// Anything.
    Raw(String),
}

impl Key {
    fn name(&self) -> &str {
        match self {
            Key::RequestId => "requestId",
            Key::Text => "text",
            Key::TurnId => "turnId",
            Key::Answer => "answer",
            Key::Hash => "hash",
            Key::ConfirmAlways => "confirmAlways",
            Key::Target => "target",
            Key::Id => "id",
            Key::Title => "title",
            Key::Wire => "wire",
            Key::Collie => "collie",
            Key::Raw(s) => s,
        }
    }
}

/// A JSON value of a request body.
#[derive(Debug, Clone, Arbitrary)]
pub enum Val {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (a non-finite one is written as `null`).
    Float(f64),
    /// Anything.
    Str(String),
    /// A string of the pool.
    Seen(u8),
    /// A target word: `workspace`, `tab`, `pane` or another.
    Target(u8),
    /// An answer object.
    Answer {
        /// `optionIds`, from the pool.
        option_ids: Option<Vec<u8>>,
        /// `text`.
        text: Option<String>,
        /// `values`: field names from the pool (`name`, `n`, `ok`, `pick`
        /// are the form's), each a scalar.
        values: Option<Vec<(u8, Scalar)>>,
    },
    /// A `wire` range.
    Wire(u32, u32),
    /// A list.
    List(Vec<Scalar>),
}

/// A JSON scalar.
#[derive(Debug, Clone, Arbitrary)]
pub enum Scalar {
    /// `null`
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// A string of the pool.
    Seen(u8),
}

/// The form's field names, in front of the pool for `values`.
const FIELDS: [&str; 4] = ["name", "n", "ok", "pick"];

impl Scalar {
    fn json(&self, pool: &Pool) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => json!(b),
            Scalar::Int(n) => json!(n),
            Scalar::Str(s) => json!(s),
            Scalar::Seen(i) => json!(pool.pick(*i)),
        }
    }
}

impl Val {
    fn json(&self, pool: &Pool) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Bool(b) => json!(b),
            Val::Int(n) => json!(n),
            Val::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Val::Str(s) => json!(s),
            Val::Seen(i) => json!(pool.pick(*i)),
            Val::Target(t) => json!(["workspace", "tab", "pane", "Pane", ""][usize::from(*t) % 5]),
            Val::Answer { option_ids, text, values } => {
                let mut m = Map::new();
                if let Some(ids) = option_ids {
                    m.insert("optionIds".into(), ids.iter().map(|i| json!(pool.pick(*i))).collect());
                }
                if let Some(t) = text {
                    m.insert("text".into(), json!(t));
                }
                if let Some(vs) = values {
                    let mut o = Map::new();
                    for (k, v) in vs {
                        let k = usize::from(*k);
                        let name = FIELDS.get(k).copied().unwrap_or_else(|| pool.pick(k as u8));
                        o.insert(name.to_owned(), v.json(pool));
                    }
                    m.insert("values".into(), Value::Object(o));
                }
                Value::Object(m)
            }
            Val::Wire(min, max) => json!({"min": min, "max": max}),
            Val::List(items) => items.iter().map(|s| s.json(pool)).collect(),
        }
    }
}

/// A request body.
#[derive(Debug, Clone, Arbitrary)]
pub enum BodySel {
    /// No body.
    Empty,
    /// Any bytes.
    Raw(Vec<u8>),
    /// Over 1 MiB (the core hears [`Body::TooLarge`]).
    TooLarge,
    /// A JSON object of these fields.
    Object(Vec<(Key, Val)>),
}

impl BodySel {
    /// The body's bytes (`None` for one over the limit).
    pub fn render(&self, pool: &Pool) -> Option<Vec<u8>> {
        match self {
            BodySel::Empty => Some(Vec::new()),
            BodySel::Raw(b) => Some(b.clone()),
            BodySel::TooLarge => None,
            BodySel::Object(fields) => {
                let mut m = Map::new();
                for (k, v) in fields {
                    m.insert(k.name().to_owned(), v.json(pool));
                }
                Some(serde_json::to_vec(&Value::Object(m)).unwrap_or_default())
            }
        }
    }
}

/// The method.
#[derive(Debug, Clone, Arbitrary)]
pub enum MethodSel {
    /// The route's own (`GET` for reads, `POST` for writes).
    Route,
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// Another: `PUT`, `HEAD`, `DELETE`, `OPTIONS`.
    Other(u8),
}

/// Who sends it.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum CallerSel {
    /// Another process of the user (Collie on the socket).
    OtherProcess,
    /// The agent itself or a descendant.
    SelfOrDescendant,
    /// Another user.
    OtherUser,
    /// Unknown (no peer check).
    Unknown,
    /// HTTPS with the token.
    Token,
}

impl CallerSel {
    /// The caller.
    pub fn caller(self) -> Caller {
        match self {
            CallerSel::OtherProcess => Caller::OtherProcess,
            CallerSel::SelfOrDescendant => Caller::SelfOrDescendant,
            CallerSel::OtherUser => Caller::OtherUser,
            CallerSel::Unknown => Caller::Unknown,
            CallerSel::Token => Caller::Token,
        }
    }
}

/// `If-None-Match`.
#[derive(Debug, Clone, Arbitrary)]
pub enum InmSel {
    /// `*`
    Star,
    /// The last `ETag` the agent gave (or a string of the pool).
    Last,
    /// A string of the pool.
    Seen(u8),
    /// Anything.
    Raw(String),
}

/// One request, structured.
#[derive(Debug, Clone, Arbitrary)]
pub struct Req {
    /// The method.
    pub method: MethodSel,
    /// The path.
    pub path: PathSel,
    /// The query parameters, if there is a query.
    pub query: Option<Vec<(QKey, QVal)>>,
    /// `If-None-Match`.
    pub if_none_match: Option<InmSel>,
    /// The body.
    pub body: BodySel,
    /// The caller.
    pub caller: CallerSel,
}

/// A request rendered as text parts, for the core or for HTTP.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The method name.
    pub method: String,
    /// The path, percent-encoded.
    pub path: String,
    /// The query, if any.
    pub query: Option<String>,
    /// `If-None-Match`.
    pub if_none_match: Option<String>,
    /// The body (`None`: over the limit).
    pub body: Option<Vec<u8>>,
}

impl Req {
    /// The request's parts, strings picked from `pool`; `last_etag` for
    /// [`InmSel::Last`].
    pub fn render(&self, pool: &Pool, last_etag: Option<&str>) -> Rendered {
        let method = match &self.method {
            MethodSel::Route => self.path.method(),
            MethodSel::Get => "GET",
            MethodSel::Post => "POST",
            MethodSel::Other(i) => ["PUT", "HEAD", "DELETE", "OPTIONS"][usize::from(*i) % 4],
        };
        Rendered {
            method: method.to_owned(),
            path: self.path.render(pool),
            query: self.query.as_ref().map(|q| render_query(q, pool)),
            if_none_match: self.if_none_match.as_ref().map(|i| match i {
                InmSel::Star => "*".to_owned(),
                InmSel::Last => last_etag.map_or_else(|| pool.pick(0).to_owned(), str::to_owned),
                InmSel::Seen(i) => format!("\"{}\"", pool.pick(*i)),
                InmSel::Raw(s) => s.clone(),
            }),
            body: self.body.render(pool),
        }
    }

    /// The core's request.
    pub fn to_core(&self, pool: &Pool, last_etag: Option<&str>) -> Request {
        let r = self.render(pool, last_etag);
        Request {
            method: Method::from_name(&r.method),
            path: r.path,
            query: r.query,
            if_none_match: r.if_none_match,
            body: match r.body {
                Some(b) => Body::Complete(Bytes::from(b)),
                None => Body::TooLarge,
            },
            caller: self.caller.caller(),
        }
    }
}
