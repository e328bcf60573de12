//! What a receipt store keeps: receipts, the sends journal's entries, the
//! open asks, and the store's error (contract §9). Plain data, shared by
//! the protocol and every store.

use std::fmt;

use bytes::Bytes;
use durable_types::Ask;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// A stored answer: the status and the JSON body as first sent
/// (`"replayed": false`; the core sets it to true when it replays).
///
/// The body is kept as the bytes that were sent, not as a parsed value:
/// storing, keeping and handing a receipt around copies nothing, and a
/// store writes it as it is. It is parsed only when it is replayed.
///
/// As JSON (`Serialize`, `Deserialize`, with `serde_json` only) a receipt
/// is `{"status":200,"body":{…}}`, its body written as the JSON it is (but
/// for any whitespace around it), so a store may keep it as one line.
/// Two receipts are equal when their bytes are.
#[derive(Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The HTTP status of the first answer (200).
    pub status: u16,
    /// The JSON body of the first answer, byte for byte.
    pub body: Bytes,
}

impl Receipt {
    /// A receipt of `body`, the JSON text of the first answer (not
    /// checked here: a body that does not parse is refused when it is
    /// replayed, as `500 internal`).
    pub fn new(status: u16, body: impl Into<Bytes>) -> Self {
        Receipt { status, body: body.into() }
    }

    /// A receipt whose body is `body` written as JSON.
    pub fn of_json(status: u16, body: &Value) -> Self {
        // Writing a `Value` into a Vec cannot fail: every key is a string.
        Receipt::new(status, serde_json::to_vec(body).unwrap_or_else(|_| b"null".to_vec()))
    }

    /// A receipt read back from a store's text: `Err` when it is not JSON.
    pub fn from_json_text(status: u16, text: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&RawValue>(&text)?;
        Ok(Receipt::new(status, text))
    }

    /// The body as text for a store to keep: `Err` when it is not JSON
    /// (a receipt the core made always is).
    pub fn json_text(&self) -> Result<&str, serde_json::Error> {
        self.raw().map(RawValue::get)
    }

    /// The body as one JSON value, checked (UTF-8 and JSON), not parsed.
    fn raw(&self) -> Result<&RawValue, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// The body parsed.
    pub fn parse_body(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receipt")
            .field("status", &self.status)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

/// The JSON form of a receipt: its body written as the JSON it is.
#[derive(Serialize, Deserialize)]
struct ReceiptJson<B> {
    status: u16,
    body: B,
}

impl Serialize for Receipt {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let body = self.raw().map_err(serde::ser::Error::custom)?;
        ReceiptJson { status: self.status, body }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Receipt {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = ReceiptJson::<Box<RawValue>>::deserialize(deserializer)?;
        Ok(Receipt::new(r.status, Bytes::from(r.body.get().as_bytes().to_vec())))
    }
}

/// What a `ReceiptStore` knows of a request id.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Lookup {
    /// The id has a receipt.
    Found(Receipt),
    /// The id had a receipt that was evicted: the core answers
    /// `500 receipt-dropped` and executes nothing.
    Evicted,
    /// The id is new.
    Unknown,
}

/// An error from a receipt store (a disk full, a database gone).
#[derive(Debug, thiserror::Error)]
#[error("receipt store: {message}")]
pub struct StoreError {
    message: String,
}

impl StoreError {
    /// An error with a message (never a secret).
    pub fn new(message: impl Into<String>) -> Self {
        StoreError { message: message.into() }
    }
}

/// Where an acknowledged send stands (§9.1): what a store that keeps sends
/// across restarts records, and what a replay of the send reports as
/// its `Durable-Delivery` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SendState {
    /// Waiting for the pane to be idle (or not yet answered).
    Queued,
    /// Its turn is running.
    Running,
    /// Its turn ran to its end.
    Done,
    /// It was closed without being carried out, with a notice on the pane:
    /// the agent restarted during its turn, a handler refused it when its
    /// turn came, or its pane was not there after a restart.
    Closed,
}

impl SendState {
    /// The wire word: `queued`, `running`, `done`, `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            SendState::Queued => "queued",
            SendState::Running => "running",
            SendState::Done => "done",
            SendState::Closed => "closed",
        }
    }

    /// The state from its wire word.
    pub fn parse(word: &str) -> Option<SendState> {
        [SendState::Queued, SendState::Running, SendState::Done, SendState::Closed]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

impl fmt::Display for SendState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A send as a store keeps it until its turn is over (§9.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingSend {
    /// The send's request id.
    pub request_id: String,
    /// Its pane.
    pub pane: String,
    /// Its text.
    pub text: String,
    /// Where it stands.
    pub state: SendState,
}

impl PendingSend {
    /// A send, in `state`.
    pub fn new(
        request_id: impl Into<String>,
        pane: impl Into<String>,
        text: impl Into<String>,
        state: SendState,
    ) -> Self {
        PendingSend { request_id: request_id.into(), pane: pane.into(), text: text.into(), state }
    }
}

/// An open ask as a store keeps it: the card as it went on the wire (kind,
/// words, tool line, options, item, expiry, id and hash) and the agent's
/// own [`agent_data`](durable_types::AskSpec::agent_data). A store writes
/// it as one JSON text (it is `Serialize + Deserialize`) and reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KeptAskRecord {
    /// The card as raised.
    pub ask: Ask,
    /// The agent's own value, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_data: Option<Value>,
}

impl KeptAskRecord {
    /// A record of `ask` with the agent's value.
    pub fn new(ask: Ask, agent_data: Option<Value>) -> Self {
        KeptAskRecord { ask, agent_data }
    }

    /// The record as one JSON text, for a store.
    pub fn to_json_text(&self) -> Result<String, StoreError> {
        serde_json::to_string(self)
            .map_err(|e| StoreError::new(format!("a kept ask could not be written: {e}")))
    }

    /// A record read back from [`to_json_text`](Self::to_json_text).
    pub fn from_json_text(text: &str) -> Result<Self, StoreError> {
        serde_json::from_str(text).map_err(|e| StoreError::new(format!("a kept ask is damaged: {e}")))
    }
}
