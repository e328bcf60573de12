//! Conversation → pane: what each entry of the branch shown becomes.
//!
//! | entry | item |
//! |---|---|
//! | user message | `user` (its text; an image reads `[image]`) |
//! | assistant text block | `reply` |
//! | assistant thinking block | `thinking` (a redacted one reads `[redacted]`) |
//! | assistant tool call | `tool`, `running`, its call as `name(key: value, …)` |
//! | tool result | the same `tool` item, `ok` or `error`, with the output |
//! | assistant message that failed / was stopped | a `notice` (error: Pi's message / info: `Stopped.`) |
//! | `compaction`, `branch_summary` | a `notice` with the summary |
//! | shown custom message (`display: true`) | a `notice` with its text |
//! | `session_info` | the pane's title (the last one in the file) |
//! | everything else | nothing: system prompts, model and thinking level changes, usage, custom entries, hidden custom messages, labels, context edits, `!` commands run in Pi, unknown types |
//!
//! The whole branch is shown, also what a compaction summarized (the notice
//! sits where the compaction happened): the phone shows the conversation as
//! it went, not the model's context. Every item goes through the item rules
//! ([`Item::sanitized`]): text is cleaned and cut to its kind's limit (a
//! tool's output to 64 KiB).
//!
//! # Stable item ids
//! An item's id is `pi-<entry id>-<n>`: `n` is the block's position in an
//! assistant message (a failure notice takes the position after the last
//! block), and 0 for an entry that gives one item. Entry ids are unique in a
//! file and never change, so reading a file again, or following it, writes
//! the same ids: items are rewritten in place, never duplicated. A tool
//! result updates the item of its call (found by the call id on the branch).
//! When `pi-<entry id>-<n>` would break the ID rule (an entry id with white
//! space, `/`, `?`, `#`, or too long), the entry id is replaced by the first
//! 32 hex characters of its SHA-256.

use std::collections::HashMap;

use durable_types::{Id, Item, ItemBody, NoticeTone, ToolStatus, call_summary};
use sha2::{Digest, Sha256};

use crate::session::{Block, Entry, EntryKind, Message, Session, StopReason};

/// The notice of an assistant message that was stopped.
pub const STOPPED: &str = "Stopped.";
/// The notice of an assistant message that failed without saying why.
pub const FAILED: &str = "The model failed.";
/// What a compaction's notice starts with.
pub const COMPACTION_PREFIX: &str = "Compaction summary: ";
/// What a branch summary's notice starts with.
pub const BRANCH_SUMMARY_PREFIX: &str = "Branch summary: ";

/// A conversation as a pane shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PaneView {
    /// The session's name, for the pane's title.
    pub title: Option<String>,
    /// The items of the branch shown, in order.
    pub items: Vec<Item>,
}

/// The pane of a session: the title and the items of the branch shown.
///
/// ```
/// use durable_sdk::pi::{Session, pane_view};
/// use durable_sdk::types::{ItemBody, ToolStatus};
///
/// let text = concat!(
///     r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-12-01T05:00:00.000Z"}"#, "\n",
///     r#"{"type":"session_info","id":"n","parentId":null,"name":"Deploy"}"#, "\n",
///     r#"{"type":"message","id":"u1","parentId":"n","message":{"role":"user","content":"list files"}}"#, "\n",
///     r#"{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":[{"type":"thinking","thinking":"ls will do"},{"type":"toolCall","id":"call-1","name":"bash","arguments":{"command":"ls"}}],"stopReason":"toolUse"}}"#, "\n",
///     r#"{"type":"message","id":"r1","parentId":"a1","message":{"role":"toolResult","toolCallId":"call-1","toolName":"bash","content":[{"type":"text","text":"README.md"}],"isError":false}}"#, "\n",
/// );
/// let view = pane_view(&Session::parse(text.as_bytes()));
/// assert_eq!(view.title.as_deref(), Some("Deploy"));
/// let ids: Vec<&str> = view.items.iter().map(|i| i.id.as_str()).collect();
/// assert_eq!(ids, ["pi-u1-0", "pi-a1-0", "pi-a1-1"]);
/// match &view.items[2].body {
///     ItemBody::Tool { call, status, output, .. } => {
///         assert_eq!(call, r#"bash(command: "ls")"#);
///         assert_eq!(*status, ToolStatus::Ok);
///         assert_eq!(output.as_deref(), Some("README.md"));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn pane_view(session: &Session) -> PaneView {
    PaneView {
        title: session.name().map(str::to_owned),
        items: map_branch(session).into_iter().map(|m| m.item).collect(),
    }
}

/// The items of the branch shown that entries at index `first_entry` or
/// later (in [`Session::entries`]) created or changed: what to write after
/// a [`Follower::poll`](crate::Follower::poll) whose
/// [`new_entries`](crate::Progress::new_entries) start there. A tool item
/// whose result is new comes whole, with its result.
pub fn items_since(session: &Session, first_entry: usize) -> Vec<Item> {
    map_branch(session).into_iter().filter(|m| m.changed_at >= first_entry).map(|m| m.item).collect()
}

/// How many items the branch shown gives.
pub fn item_count(session: &Session) -> usize {
    map_branch(session).len()
}

/// The id of the `n`th item of an entry: `pi-<entry id>-<n>` (see the
/// module docs).
///
/// ```
/// assert_eq!(durable_sdk::pi::item_id("1edce6d1", 2).as_str(), "pi-1edce6d1-2");
/// assert_eq!(durable_sdk::pi::item_id("a b", 0).as_str().len(), "pi--0".len() + 32);
/// ```
pub fn item_id(entry_id: &str, n: usize) -> Id {
    Id::new(format!("pi-{entry_id}-{n}")).unwrap_or_else(|_| {
        let digest = Sha256::digest(entry_id.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Id::new(format!("pi-{hex}-{n}")).expect("hex digits follow the ID rule")
    })
}

/// An item and the index of the entry that last changed it.
struct Mapped {
    item: Item,
    changed_at: usize,
}

fn map_branch(session: &Session) -> Vec<Mapped> {
    let entries = session.entries();
    let mut out: Vec<Mapped> = Vec::new();
    // Tool call id → its item in `out`.
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for index in session.branch_indices() {
        let entry = &entries[index];
        match effect(entry) {
            Effect::Items(parts) => {
                for part in parts {
                    if let Some(call) = part.call_id {
                        calls.insert(call, out.len());
                    }
                    if let Some(item) = entry_item(entry, part.n, part.body) {
                        out.push(Mapped { item, changed_at: index });
                    }
                }
            }
            Effect::Result(result) => match calls.get(result.call_id).and_then(|&k| out.get_mut(k)) {
                Some(mapped) => {
                    with_result(&mut mapped.item, result.status, result.output);
                    mapped.changed_at = index;
                }
                None => {
                    if let Some(item) = entry_item(entry, 0, result.own_item()) {
                        out.push(Mapped { item, changed_at: index });
                    }
                }
            },
        }
    }
    out
}

/// What one entry does to the items of the branch it is on.
pub(crate) enum Effect<'a> {
    /// It gives these items, in order (none for a hidden entry).
    Items(Vec<Part<'a>>),
    /// A tool result: it updates the item of its call, the latest one on the
    /// branch before it with that call id; without one it is an item of its
    /// own ([`ToolResultOf::own_item`]), which no later result updates.
    Result(ToolResultOf<'a>),
}

/// A tool result, as it changes its call's item.
pub(crate) struct ToolResultOf<'a> {
    pub(crate) call_id: &'a str,
    tool_name: &'a str,
    status: ToolStatus,
    output: Option<String>,
}

impl ToolResultOf<'_> {
    /// The item of a result whose call is not on the branch.
    pub(crate) fn own_item(self) -> ItemBody {
        tool(self.tool_name, format!("{}()", self.tool_name), self.status, self.output)
    }

    /// Writes the result into its call's item.
    pub(crate) fn apply(self, item: &mut Item) {
        with_result(item, self.status, self.output);
    }
}

/// What `entry` does to the items of its branch. Every item it gives passes
/// the item rules ([`entry_item`] never drops one of these bodies: no badge,
/// language or link), so an entry's item count is its parts' count.
pub(crate) fn effect(entry: &Entry) -> Effect<'_> {
    let one = |body| Effect::Items(vec![Part { n: 0, body, call_id: None }]);
    match &entry.kind {
        EntryKind::Message { message, .. } => match message {
            Message::User { content } => {
                one(ItemBody::User { text: Block::text_of(content), request_id: None })
            }
            Message::Assistant { content, stop_reason, error_message } => {
                Effect::Items(assistant_items(content, stop_reason, error_message.as_deref()))
            }
            Message::ToolResult { tool_call_id, tool_name, content, is_error } => {
                let (status, output) = tool_result(content, *is_error);
                Effect::Result(ToolResultOf { call_id: tool_call_id, tool_name, status, output })
            }
            Message::Custom { content, display: true, .. } => {
                one(notice(Block::text_of(content), NoticeTone::Info))
            }
            _ => Effect::Items(Vec::new()),
        },
        EntryKind::Compaction { summary, .. } => {
            one(notice(format!("{COMPACTION_PREFIX}{summary}"), NoticeTone::Info))
        }
        EntryKind::BranchSummary { summary, .. } => {
            one(notice(format!("{BRANCH_SUMMARY_PREFIX}{summary}"), NoticeTone::Info))
        }
        EntryKind::CustomMessage { content, display: true, .. } => {
            one(notice(Block::text_of(content), NoticeTone::Info))
        }
        _ => Effect::Items(Vec::new()),
    }
}

/// The `n`th item of `entry`, by the item rules.
pub(crate) fn entry_item(entry: &Entry, n: usize, body: ItemBody) -> Option<Item> {
    Item { id: item_id(&entry.id, n), ts: entry.time(), body }.sanitized().ok().map(|(item, _)| item)
}

/// One item an assistant message gives.
pub(crate) struct Part<'a> {
    /// Its position: the block's index; a failure or stop notice takes the
    /// position after the last block.
    pub(crate) n: usize,
    pub(crate) body: ItemBody,
    /// The tool call's id, for a `tool` item.
    pub(crate) call_id: Option<&'a str>,
}

/// What an assistant message shows: its text, thinking and tool call blocks
/// (empty ones give nothing), then a notice when it failed or was stopped.
pub(crate) fn assistant_items<'a>(
    content: &'a [Block],
    stop_reason: &StopReason,
    error_message: Option<&str>,
) -> Vec<Part<'a>> {
    let mut out = Vec::new();
    for (n, block) in content.iter().enumerate() {
        let (body, call_id) = match block {
            Block::Text(text) if !text.trim().is_empty() => {
                (ItemBody::Reply { text: text.clone(), partial: false }, None)
            }
            Block::Thinking { text, redacted } if *redacted || !text.trim().is_empty() => {
                let text = if *redacted { "[redacted]".to_owned() } else { text.clone() };
                (ItemBody::Thinking { text, partial: false }, None)
            }
            Block::ToolCall { id, name, arguments } => {
                (tool(name, call_summary(name, arguments), ToolStatus::Running, None), Some(id.as_str()))
            }
            _ => continue,
        };
        out.push(Part { n, body, call_id });
    }
    let n = content.len();
    match stop_reason {
        StopReason::Error => {
            let text = error_message.map_or_else(|| FAILED.to_owned(), str::to_owned);
            out.push(Part { n, body: notice(text, NoticeTone::Error), call_id: None })
        }
        StopReason::Aborted => {
            out.push(Part { n, body: notice(STOPPED.to_owned(), NoticeTone::Info), call_id: None })
        }
        _ => {}
    }
    out
}

/// A tool item's status and output from a result.
pub(crate) fn tool_result(content: &[Block], is_error: bool) -> (ToolStatus, Option<String>) {
    let status = if is_error { ToolStatus::Error } else { ToolStatus::Ok };
    (status, Some(Block::text_of(content)).filter(|o| !o.is_empty()))
}

pub(crate) fn tool(name: &str, call: String, status: ToolStatus, output: Option<String>) -> ItemBody {
    ItemBody::Tool { name: name.to_owned(), call, status, output, badge: None }
}

pub(crate) fn notice(text: String, tone: NoticeTone) -> ItemBody {
    ItemBody::Notice { text, partial: false, tone: Some(tone) }
}

/// A tool item with its result, cut by the item rules.
fn with_result(item: &mut Item, new_status: ToolStatus, new_output: Option<String>) {
    if let ItemBody::Tool { status, output, .. } = &mut item.body {
        *status = new_status;
        *output = new_output;
    }
    if let Ok((clean, _)) = item.clone().sanitized() {
        *item = clean;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T05:00:00.000Z"}"#;

    fn session(lines: &[&str]) -> Session {
        let text: String =
            std::iter::once(HEADER).chain(lines.iter().copied()).map(|l| format!("{l}\n")).collect();
        Session::parse(text.as_bytes())
    }

    fn kinds(view: &PaneView) -> Vec<&'static str> {
        view.items.iter().map(|i| i.body.kind()).collect()
    }

    #[test]
    fn item_ids_that_would_break_the_id_rule_use_a_digest() {
        assert_eq!(item_id("abc", 3).as_str(), "pi-abc-3");
        let long = "x".repeat(200);
        for bad in ["a b", "a/b", "a?b", "a#b", long.as_str()] {
            let id = item_id(bad, 1);
            assert!(id.as_str().starts_with("pi-") && id.as_str().ends_with("-1"), "{id}");
            assert_eq!(id, item_id(bad, 1), "stable");
        }
        assert_ne!(item_id("a b", 0), item_id("a/b", 0));
    }

    #[test]
    fn a_tool_result_without_its_call_on_the_branch_is_a_tool_item_of_its_own() {
        let view = pane_view(&session(&[
            r#"{"type":"message","id":"r","parentId":null,"message":{"role":"toolResult","toolCallId":"x","toolName":"read","content":[],"isError":true}}"#,
        ]));
        match &view.items[0].body {
            ItemBody::Tool { name, call, status, output, .. } => {
                assert_eq!(
                    (name.as_str(), call.as_str(), *status, output),
                    ("read", "read()", ToolStatus::Error, &None)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_and_stops_leave_a_notice_after_the_blocks() {
        let view = pane_view(&session(&[
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"text","text":"par"}],"stopReason":"aborted","errorMessage":"Request was aborted"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 rate limited"}}"#,
        ]));
        let ids: Vec<&str> = view.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["pi-a-0", "pi-a-1", "pi-b-0"]);
        assert_eq!(view.items[1].body, notice(STOPPED.into(), NoticeTone::Info));
        assert_eq!(view.items[2].body, notice("429 rate limited".into(), NoticeTone::Error));
    }

    #[test]
    fn hidden_entries_give_no_item() {
        let view = pane_view(&session(&[
            r#"{"type":"model_change","id":"a","parentId":null,"provider":"p","modelId":"m"}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"system","content":""}}"#,
            r#"{"type":"custom","id":"c","parentId":"b","customType":"x","data":{}}"#,
            r#"{"type":"custom_message","id":"d","parentId":"c","customType":"x","content":"no","display":false}"#,
            r#"{"type":"label","id":"e","parentId":"d","targetId":"a","label":"l"}"#,
            r#"{"type":"context_edit","id":"f","parentId":"e","targetId":"a","replacement":null}"#,
            r#"{"type":"message","id":"g","parentId":"f","message":{"role":"bashExecution","command":"ls","output":""}}"#,
            r#"{"type":"usage","id":"h","parentId":"g","kind":"cache_warm"}"#,
            r#"{"type":"what_next","id":"i","parentId":"h"}"#,
            r#"{"type":"message","id":"j","parentId":"i","message":{"role":"assistant","content":[{"type":"text","text":"  "},{"type":"thinking","thinking":""}],"stopReason":"stop"}}"#,
        ]));
        assert!(view.items.is_empty(), "{view:?}");
    }

    #[test]
    fn shown_custom_messages_and_summaries_are_notices() {
        let s = session(&[
            r#"{"type":"custom_message","id":"a","parentId":null,"customType":"x","content":[{"type":"text","text":"note"}],"display":true}"#,
            r#"{"type":"compaction","id":"b","parentId":"a","summary":"sum","firstKeptEntryId":"a","tokensBefore":1}"#,
            r#"{"type":"branch_summary","id":"c","parentId":"b","fromId":"z","summary":"left"}"#,
            r#"{"type":"message","id":"d","parentId":"c","message":{"role":"custom","customType":"x","content":"old style","display":true}}"#,
        ]);
        let view = pane_view(&s);
        assert_eq!(kinds(&view), ["notice"; 4]);
        assert_eq!(view.items[1].body, notice("Compaction summary: sum".into(), NoticeTone::Info));
        assert_eq!(view.items[2].body, notice("Branch summary: left".into(), NoticeTone::Info));
        assert_eq!(view.items[3].id.as_str(), "pi-d-0");
    }

    #[test]
    fn tool_output_is_cut_by_the_item_rules() {
        let big = "y".repeat(100 * 1024);
        let result = format!(
            r#"{{"type":"message","id":"r","parentId":"a","message":{{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{{"type":"text","text":"{big}"}}],"isError":false}}}}"#
        );
        let view = pane_view(&session(&[
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"yes"}}],"stopReason":"toolUse"}}"#,
            &result,
        ]));
        match &view.items[0].body {
            ItemBody::Tool { output: Some(out), status: ToolStatus::Ok, .. } => {
                assert_eq!(out.len(), 64 * 1024)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn items_since_gives_new_items_and_the_tool_items_their_results_changed() {
        let s = session(&[
            r#"{"type":"message","id":"u","parentId":null,"message":{"role":"user","content":"go"}}"#,
            r#"{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"toolCall","id":"c","name":"bash","arguments":{}}],"stopReason":"toolUse"}}"#,
            r#"{"type":"message","id":"r","parentId":"a","message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":"done","isError":false}}"#,
            r#"{"type":"message","id":"b","parentId":"r","message":{"role":"assistant","content":[{"type":"text","text":"finished"}],"stopReason":"stop"}}"#,
        ]);
        let ids = |first| items_since(&s, first).into_iter().map(|i| i.id.into_string()).collect::<Vec<_>>();
        assert_eq!(ids(0), ["pi-u-0", "pi-a-0", "pi-a-1", "pi-b-0"]);
        assert_eq!(ids(2), ["pi-a-1", "pi-b-0"]);
        assert_eq!(ids(3), ["pi-b-0"]);
        assert!(ids(4).is_empty());
        assert_eq!(item_count(&s), 4);
    }
}
