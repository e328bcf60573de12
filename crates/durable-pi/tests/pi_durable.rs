//! The Pi Durable reader against a writer that follows the storage format
//! (format 1, as the `durable` module documents it): commits
//! appended to `main.jsonl`, with the bookkeeping a chat skips, sidecar
//! files, entries written again, sub-agents, a torn last line.

use std::io::Write;
use std::path::{Path, PathBuf};

use durable_pi::durable::RESET;
use durable_pi::{ConversationStore, DurableFolder, PiHistory};
use durable_types::{ItemBody, ToolStatus};
use serde_json::{Value, json};

/// Appends commits as Pi Durable does: one JSON line per commit, `seq`
/// growing, every write of the commit in it.
struct Writer {
    dir: PathBuf,
    seq: u64,
}

impl Writer {
    fn new(name: &str) -> Writer {
        let dir = std::env::temp_dir().join(format!("durable-pi-durable-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Sidecars and a reclaim file: the reader needs none of them.
        std::fs::write(dir.join("doc-7.jsonl"), "{\"format\":1,\"type\":\"document\"}\n").unwrap();
        std::fs::write(dir.join("task-9.jsonl"), "garbage").unwrap();
        std::fs::write(dir.join("main.jsonl.reclaim"), "").unwrap();
        Writer { dir, seq: 0 }
    }

    fn line(&self) -> std::fs::File {
        std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("main.jsonl")).unwrap()
    }

    fn commit_text(&mut self, writes: Value) -> String {
        self.seq += 1;
        json!({"format": 1, "type": "commit", "seq": self.seq, "writes": writes}).to_string()
    }

    fn commit(&mut self, writes: Value) {
        let text = self.commit_text(writes);
        writeln!(self.line(), "{text}").unwrap();
    }

    fn raw(&self, bytes: &str) {
        self.line().write_all(bytes.as_bytes()).unwrap();
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

fn conversation(id: u64) -> Value {
    json!({"type": "conversation", "value": {"id": id}})
}

fn entry(id: u64, conversation: u64, kind: &str, model: Value) -> Value {
    json!({"type": "entry", "value": {"id": id, "conversationId": conversation, "kind": kind, "model": [model]}})
}

fn user(text: &str, at: u64) -> Value {
    json!({"role": "user", "content": text, "timestamp": at})
}

fn assistant(content: Value, stop: &str, at: u64) -> Value {
    json!({"role": "assistant", "content": content, "stopReason": stop, "timestamp": at})
}

const T: u64 = 1_796_100_000_000;

/// A store with two conversations, a sub-agent, and every kind of write.
fn filled(name: &str) -> Writer {
    let mut w = Writer::new(name);
    w.commit(json!([
        conversation(1),
        entry(2, 1, "pi.system", json!({"role": "system", "content": "prompt"}))
    ]));
    w.commit(json!([
        {"type": "submission", "value": {"id": 3, "conversationId": 1, "requestId": "r-1", "mode": "prompt"}},
        entry(4, 1, "pi.user", user("deploy the site", T)),
        {"type": "task", "value": {"id": 5, "state": "running"}},
        {"type": "document.create", "value": {"id": 7}},
    ]));
    // The assistant entry is written while it streams, then again when done.
    w.commit(json!([entry(
        6,
        1,
        "pi.assistant",
        assistant(json!([{"type": "text", "text": "Deplo"}]), "pending", T + 1)
    )]));
    w.commit(json!([entry(
        6,
        1,
        "pi.assistant",
        assistant(
            json!([
                {"type": "thinking", "thinking": "needs bash"},
                {"type": "text", "text": "Deploying."},
                {"type": "toolCall", "id": "call-1", "name": "bash", "arguments": {"command": "make deploy"}}
            ]),
            "toolUse",
            T + 2
        )
    )]));
    w.commit(json!([entry(
        8,
        1,
        "pi.tool-result",
        json!({"role": "toolResult", "toolCallId": "call-1", "toolName": "bash", "content": [{"type": "text", "text": "deployed"}], "isError": false, "timestamp": T + 3})
    )]));
    w.commit(json!([
        {"type": "entry", "value": {"id": 10, "conversationId": 1, "kind": "app.note", "data": {"text": "an app's own"}}},
        {"type": "entry", "value": {"id": 11, "conversationId": 1, "kind": "pi.compaction", "data": {"summary": "they deployed"}, "head": 8}},
        {"type": "document.change", "value": {"id": 7, "ops": []}},
    ]));
    // A sub-agent the first conversation delegated to.
    w.commit(json!([
        {"type": "conversation", "value": {"id": 12, "owner": {"conversationId": 1, "taskId": 5}}},
        entry(13, 12, "pi.user", user("check the logs", T + 4)),
    ]));
    // A second conversation, forked from the first, later.
    w.commit(json!([
        {"type": "conversation", "value": {"id": 14, "parent": {"conversationId": 1, "at": 6}}},
        {"type": "entry", "value": {"id": 15, "conversationId": 14, "kind": "pi.reset", "data": {}}},
        entry(16, 14, "pi.user", user("and now the docs", T + 10)),
        entry(17, 14, "pi.assistant", assistant(json!([{"type": "text", "text": "Half"}]), "aborted", T + 11)),
    ]));
    w
}

#[test]
fn conversations_are_listed_newest_first_without_sub_agents_and_titled_by_their_first_text() {
    let w = filled("list");
    let store = DurableFolder::new(w.dir());
    let list = store.conversations().unwrap();
    let rows: Vec<(String, String, u64)> = list.iter().map(|c| (c.id.clone(), c.title(), c.items)).collect();
    assert_eq!(
        rows,
        [
            ("14".to_owned(), "and now the docs".to_owned(), 4),
            ("1".to_owned(), "deploy the site".to_owned(), 5)
        ]
    );
    assert_eq!(list[1].started_at.as_millis(), T);
    assert_eq!(list[1].last_activity.as_millis(), T + 3);
    assert_eq!(store.last_seq(), 8);
    assert_eq!(store.skipped(), 0);
    // The sub-agent is not listed, but reads by its id.
    assert_eq!(store.conversation("12").unwrap().unwrap().items.len(), 1);
    assert!(store.conversation("012").unwrap().is_none());
    assert!(store.conversation("99").unwrap().is_none());
}

#[test]
fn entries_become_items_with_stable_ids_an_entry_written_again_replaces_the_earlier() {
    let w = filled("items");
    let store = DurableFolder::new(w.dir());
    let c = store.conversation("1").unwrap().unwrap();
    let ids: Vec<&str> = c.items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["pi-4-0", "pi-6-0", "pi-6-1", "pi-6-2", "pi-11-0"]);
    assert_eq!(c.items[1].body, ItemBody::Thinking { text: "needs bash".into(), partial: false });
    assert_eq!(c.items[2].body, ItemBody::Reply { text: "Deploying.".into(), partial: false });
    match &c.items[3].body {
        ItemBody::Tool { call, status, output, .. } => {
            assert_eq!(call, r#"bash(command: "make deploy")"#);
            assert_eq!((*status, output.as_deref()), (ToolStatus::Ok, Some("deployed")));
        }
        other => panic!("{other:?}"),
    }
    match &c.items[4].body {
        ItemBody::Notice { text, .. } => assert_eq!(text, "Compaction summary: they deployed"),
        other => panic!("{other:?}"),
    }
    let forked = store.conversation("14").unwrap().unwrap();
    let texts: Vec<String> = forked
        .items
        .iter()
        .map(|i| match &i.body {
            ItemBody::Notice { text, .. } | ItemBody::User { text, .. } | ItemBody::Reply { text, .. } => {
                text.clone()
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, [RESET, "and now the docs", "Half", "Stopped."]);
    // Read again, by another reader: the same ids, the same items.
    assert_eq!(DurableFolder::new(w.dir()).conversation("1").unwrap().unwrap().items, c.items);
}

#[test]
fn a_torn_last_line_waits_for_its_newline_and_new_commits_are_read_as_they_come() {
    let mut w = filled("torn");
    let store = DurableFolder::new(w.dir());
    assert_eq!(store.conversations().unwrap().len(), 2);
    let next = w.commit_text(json!([conversation(20), entry(21, 20, "pi.user", user("a third", T + 20))]));
    let (head, tail) = next.split_at(next.len() / 2);
    w.raw(head);
    assert!(!store.refresh().unwrap(), "half a commit is not read");
    assert_eq!(store.conversations().unwrap().len(), 2);
    assert_eq!(store.skipped(), 0, "nor counted as bad");
    w.raw(&format!("{tail}\n"));
    let list = store.conversations().unwrap();
    assert_eq!((list.len(), list[0].title()), (3, "a third".to_owned()));
    // Lines that are not format 1 commits are skipped and counted.
    w.raw("not json\n{\"format\":2,\"type\":\"commit\",\"seq\":99,\"writes\":[]}\n\n");
    w.commit(json!([entry(
        22,
        20,
        "pi.assistant",
        assistant(json!([{"type": "text", "text": "ok"}]), "stop", T + 21)
    )]));
    assert_eq!(store.conversation("20").unwrap().unwrap().items.len(), 2);
    assert_eq!(store.skipped(), 2);
    assert_eq!(store.last_seq(), 10);
}

/// A crash tore the last commit; the recovery cut it off and appended the
/// next commit whole, longer than the torn bytes were. A reader that held
/// the torn bytes reads the new commit from its start, loses nothing and
/// counts nothing as bad.
#[test]
fn a_commit_written_where_a_recovery_cut_a_torn_line_is_read_whole() {
    let mut w = filled("recovered");
    let store = DurableFolder::new(w.dir());
    assert_eq!(store.conversations().unwrap().len(), 2);
    let main = w.dir().join("main.jsonl");
    let whole = std::fs::metadata(&main).unwrap().len();
    let torn =
        w.commit_text(json!([conversation(30), entry(31, 30, "pi.user", user("lost in the crash", T + 30))]));
    let torn = &torn[..torn.len() / 2];
    w.raw(torn);
    assert!(!store.refresh().unwrap(), "the torn bytes wait for their newline");
    // The recovery: the torn line goes, the same seq is written again whole
    // (another commit: its bytes part from the torn ones within them).
    std::fs::OpenOptions::new().write(true).open(&main).unwrap().set_len(whole).unwrap();
    w.seq -= 1;
    let long = "a reply much longer than the torn bytes were, ".repeat(4);
    let recovered = w.commit_text(json!([conversation(40), entry(41, 40, "pi.user", user(&long, T + 40))]));
    assert!(recovered.len() > torn.len() && !recovered.starts_with(torn));
    w.raw(&format!("{recovered}\n"));
    assert!(store.refresh().unwrap());
    let list = store.conversations().unwrap();
    assert_eq!(list.len(), 3, "the recovered commit is read");
    assert_eq!(list[0].title(), long.trim_end());
    assert_eq!(store.skipped(), 0, "and nothing counted as bad");
    assert_eq!(store.last_seq(), w.seq);
}

#[tokio::test]
async fn the_history_serves_a_pi_durable_store() {
    let w = filled("history");
    let history = PiHistory::new(DurableFolder::new(w.dir()));
    history.set_open("14", true);
    let page = history.rows_page(None, 10).unwrap();
    let rows: Vec<(&str, &str)> = page.rows.iter().map(|r| (r.id.as_str(), r.title.as_str())).collect();
    assert_eq!(rows, [("14", "and now the docs"), ("1", "deploy the site")]);
    assert!(page.rows[0].ended_at.is_none() && page.rows[1].ended_at.is_some());
    let items = history.items_page("1", None, 2).unwrap().unwrap();
    assert_eq!(items.items.len(), 2);
    let rest = history.items_page("1", items.next.as_ref(), 10).unwrap().unwrap();
    assert_eq!(rest.items.last().unwrap().id.as_str(), "pi-11-0");
}
