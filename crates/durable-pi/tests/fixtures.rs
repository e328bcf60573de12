//! Session files written by the real Pi (`tests/fixtures/*.jsonl`, made by
//! `tests/fixtures/make.sh`), read back: the format, the tree, the pane, the
//! folder and the history.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use durable_pi::{
    Block, ConversationStore, EntryKind, Follower, Message, PiHistory, Session, SessionFolder, StopReason,
    items_since, pane_view,
};
use durable_types::{ConversationState, Item, ItemBody, NoticeTone};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(name: &str) -> Session {
    Session::read(&fixtures().join(name)).unwrap()
}

/// Each item as `kind: text` (a tool as `tool: call -> status: output`).
fn lines(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match &i.body {
            ItemBody::User { text, .. } => format!("user: {text}"),
            ItemBody::Reply { text, .. } => format!("reply: {text}"),
            ItemBody::Thinking { text, .. } => format!("thinking: {text}"),
            ItemBody::Notice { text, .. } => format!("notice: {text}"),
            ItemBody::Tool { call, status, output, .. } => {
                format!("tool: {call} -> {status:?}: {}", output.as_deref().unwrap_or("").trim_end())
            }
            other => other.kind().to_owned(),
        })
        .collect()
}

fn user_entry<'s>(s: &'s Session, text: &str) -> &'s durable_pi::Entry {
    s.entries()
        .iter()
        .find(|e| matches!(e.message(), Some(Message::User { content }) if Block::text_of(content) == text))
        .unwrap_or_else(|| panic!("no user message {text:?}"))
}

#[test]
fn pi_plain_conversation_is_user_reply_and_thinking_with_the_system_prompt_hidden() {
    let s = read("plain.jsonl");
    let header = s.header().unwrap();
    assert_eq!(header.version, 3);
    assert!(header.cwd.is_some() && header.parent_session.is_none());
    assert_eq!(s.malformed(), 0);
    // Pi writes model and thinking level changes and the system prompt first.
    let kinds: Vec<&str> = s.entries()[..3]
        .iter()
        .map(|e| match &e.kind {
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::Message { message: Message::System, .. } => "system",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change", "system"]);
    assert_eq!(s.branch().len(), s.entries().len());
    let view = pane_view(&s);
    assert_eq!(view.title, None);
    assert_eq!(
        lines(&view.items),
        [
            "user: hello there",
            "reply: You said: hello there",
            "user: think about a name for a cat",
            "thinking: Thinking about: think about a name for a cat",
            "reply: Done thinking.",
        ]
    );
    // Times come from the messages.
    assert!(view.items.iter().all(|i| i.ts.is_some()));
    assert!(view.items.windows(2).all(|w| w[0].ts <= w[1].ts));
}

#[test]
fn pi_tool_calls_are_tool_items_updated_in_place_by_their_results() {
    let s = read("tools.jsonl");
    let view = pane_view(&s);
    assert_eq!(
        lines(&view.items),
        [
            "user: please use bash: echo hello from bash",
            "thinking: The user wants a command run.",
            "reply: Running it.",
            r#"tool: bash(command: "echo hello from bash") -> Ok: hello from bash"#,
            "reply: The tool said: hello from bash",
            "user: use bash: ls /no/such/folder",
            "thinking: The user wants a command run.",
            "reply: Running it.",
            "tool: bash(command: \"ls /no/such/folder\") -> Error: ls: cannot access '/no/such/folder': No such file or directory\n\n\nCommand exited with code 2",
            "reply: The tool failed: ls: cannot access '/no/such/folder': No such file or directory",
        ]
    );
    // The tool item is the call's block: its id names the assistant entry
    // and the block's position.
    let call = s.entries().iter().find(|e| matches!(e.message(), Some(Message::Assistant { .. }))).unwrap();
    assert_eq!(view.items[3].id.as_str(), format!("pi-{}-2", call.id));
    match &view.items[3].body {
        ItemBody::Tool { name, .. } => assert_eq!(name, "bash"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pi_items_are_valid_unique_and_the_same_on_every_read() {
    for file in ["plain", "tools", "branches", "fork-parent", "fork-child", "compaction", "custom", "named"] {
        let view = pane_view(&read(&format!("{file}.jsonl")));
        let again = pane_view(&read(&format!("{file}.jsonl")));
        assert_eq!(view, again, "{file}");
        let mut ids: Vec<&str> = view.items.iter().map(|i| i.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), view.items.len(), "{file}: item ids are unique");
        for item in &view.items {
            let (clean, changed) = item.clone().sanitized().unwrap();
            assert!(!changed && clean == *item, "{file}: {item:?} already meets the item rules");
        }
    }
}

#[test]
fn pi_file_followed_in_any_chunks_rewrites_items_never_duplicates_them() {
    let bytes = std::fs::read(fixtures().join("tools.jsonl")).unwrap();
    let expected = pane_view(&Session::parse(&bytes)).items;
    for chunk in [1, 7, 100, 4096, bytes.len()] {
        let dir =
            std::env::temp_dir().join(format!("durable-pi-fixture-follow-{}-{chunk}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut follower = Follower::new(&path);
        // The pane, as a program writing items by id would hold it.
        let mut pane: Vec<Item> = Vec::new();
        let mut writes = 0;
        for part in bytes.chunks(chunk) {
            file.write_all(part).unwrap();
            let progress = follower.poll().unwrap();
            assert!(!progress.reset && !progress.branch_moved && progress.malformed == 0);
            for item in items_since(follower.session(), progress.new_entries.start) {
                writes += 1;
                match pane.iter_mut().find(|i| i.id == item.id) {
                    Some(old) => *old = item,
                    None => pane.push(item),
                }
            }
        }
        assert_eq!(pane, expected, "chunks of {chunk}");
        if chunk == 1 {
            assert_eq!(writes, expected.len() + 2, "each tool item is written again with its result");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn pi_torn_last_line_is_skipped_when_read_and_held_back_when_followed() {
    let torn = fixtures().join("torn/tools-torn.jsonl");
    let whole = read("tools.jsonl");
    let s = Session::read(&torn).unwrap();
    assert_eq!(s.malformed(), 1);
    assert_eq!(s.entries().len(), whole.entries().len() - 1);

    let mut follower = Follower::new(&torn);
    let progress = follower.poll().unwrap();
    assert_eq!((progress.new_entries.len(), progress.malformed), (whole.entries().len() - 1, 0));
    assert!(follower.held_back() > 0);
    // The rest of the line arrives.
    let dir = std::env::temp_dir().join(format!("durable-pi-fixture-torn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.jsonl");
    let full = std::fs::read(fixtures().join("tools.jsonl")).unwrap();
    let cut = std::fs::read(&torn).unwrap();
    std::fs::write(&path, &cut).unwrap();
    let mut follower = Follower::new(&path);
    follower.poll().unwrap();
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&full[cut.len()..]).unwrap();
    let progress = follower.poll().unwrap();
    assert_eq!((progress.new_entries.len(), progress.malformed), (1, 0));
    assert_eq!(pane_view(follower.session()), pane_view(&whole));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pi_branch_shown_is_the_path_from_the_last_entry_and_a_branch_summary_is_a_notice() {
    let s = read("branches.jsonl");
    let first = user_entry(&s, "first question");
    let reply = &s.children(&first.id)[0];
    // Three paths leave the first reply: the first second question, the one
    // asked again, and the branch summary the last path starts with.
    assert_eq!(s.children(&reply.id).len(), 3);
    assert!(!s.is_on_branch(&user_entry(&s, "second question").id));
    assert!(!s.is_on_branch(&user_entry(&s, "second question, asked again").id));
    assert!(s.is_on_branch(&user_entry(&s, "third try").id));
    // The label is an entry of the chain, and the leaf.
    assert!(matches!(s.leaf().unwrap().kind, EntryKind::Label { .. }));
    assert_eq!(s.label(&first.id), Some("start"));
    assert_eq!(s.roots().len(), 1);
    let view = pane_view(&s);
    assert_eq!(
        lines(&view.items),
        [
            "user: first question",
            "reply: You said: first question",
            "notice: Branch summary: The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\nSummary: 2 messages so far.",
            "user: third try",
            "reply: You said: third try",
        ]
    );
}

#[test]
fn pi_fork_is_a_new_file_that_names_its_parent_and_keeps_the_entry_ids() {
    let parent = read("fork-parent.jsonl");
    let child = read("fork-child.jsonl");
    let parent_id = &parent.header().unwrap().id;
    let named = child.header().unwrap().parent_session.as_deref().unwrap();
    assert!(named.ends_with(&format!("_{parent_id}.jsonl")), "{named}");
    let before = user_entry(&parent, "before the fork");
    assert_eq!(user_entry(&child, "before the fork").id, before.id);
    assert_eq!(
        lines(&pane_view(&child).items),
        [
            "user: before the fork",
            "reply: You said: before the fork",
            "user: after the fork",
            "reply: You said: after the fork"
        ]
    );
}

#[test]
fn pi_compaction_is_a_notice_where_it_happened_and_the_earlier_turns_stay() {
    let s = read("compaction.jsonl");
    let compaction = s.entries().iter().find(|e| matches!(e.kind, EntryKind::Compaction { .. })).unwrap();
    match &compaction.kind {
        EntryKind::Compaction { first_kept_entry_id: Some(kept), .. } => assert!(s.entry(kept).is_some()),
        other => panic!("{other:?}"),
    }
    let view = lines(&pane_view(&s).items);
    assert_eq!(
        view[..6],
        [
            "user: one",
            "reply: You said: one",
            "user: two",
            "reply: You said: two",
            "user: three",
            "reply: You said: three"
        ]
    );
    assert!(view[6].starts_with("notice: Compaction summary: Summary:"), "{}", view[6]);
    assert_eq!(
        view[7..],
        ["user: four, after the compaction", "reply: You said: four, after the compaction"]
    );
}

#[test]
fn pi_custom_entries_shown_ones_are_notices_the_rest_hidden() {
    let s = read("custom.jsonl");
    assert!(s.entries().iter().any(|e| e.kind == EntryKind::Custom { custom_type: "faux-state".into() }));
    assert!(
        s.entries()
            .iter()
            .any(|e| matches!(e.message(), Some(Message::BashExecution { exit_code: Some(0), .. })))
    );
    let view = pane_view(&s);
    assert_eq!(
        lines(&view.items),
        [
            "user: hello",
            "reply: You said: hello",
            "notice: remember the milk",
            "user: and now?",
            "reply: You said: and now?"
        ]
    );
    match &view.items[2].body {
        ItemBody::Notice { tone, .. } => assert_eq!(*tone, Some(NoticeTone::Info)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pi_session_name_is_the_title_and_a_stopped_reply_keeps_its_text() {
    let s = read("named.jsonl");
    // `--name` at start: a root session_info before anything else.
    assert!(
        matches!(&s.entries()[0].kind, EntryKind::SessionInfo { name: Some(n) } if n == "Fixture session")
    );
    let stopped = s
        .entries()
        .iter()
        .find_map(|e| match e.message() {
            Some(Message::Assistant { stop_reason: StopReason::Aborted, content, .. }) => Some(content),
            _ => None,
        })
        .unwrap();
    assert!(Block::text_of(stopped).starts_with("word1 word2"));
    let view = pane_view(&s);
    assert_eq!(view.title.as_deref(), Some("Renamed fixture"));
    let last = lines(&view.items[view.items.len() - 2..]);
    assert!(last[0].starts_with("reply: word1 word2"), "{last:?}");
    assert_eq!(last[1], "notice: Stopped.");
}

#[test]
fn pi_sessions_folder_lists_newest_first_and_serves_the_history() {
    let folder = SessionFolder::new(fixtures());
    let sessions = folder.sessions().unwrap();
    let names: Vec<String> =
        sessions.iter().map(|s| s.path.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    // The order the script made them in, newest first; the torn copy sits
    // in a folder of its own.
    assert_eq!(
        names,
        ["named", "custom", "compaction", "fork-child", "fork-parent", "branches", "tools", "plain"]
    );
    assert!(sessions.windows(2).all(|w| w[0].last_activity >= w[1].last_activity));

    let history = PiHistory::new(folder);
    let page = history.rows_page(None, 3).unwrap();
    let titles: Vec<&str> = page.rows.iter().map(|r| r.title.as_str()).collect();
    assert_eq!(titles, ["Renamed fixture", "hello", "one"]);
    let row = &page.rows[0];
    assert_eq!(row.state, ConversationState::Closed);
    assert!(row.started_at <= row.ended_at.unwrap());
    let rest = history.rows_page(page.next.as_ref(), 50).unwrap();
    assert_eq!(rest.rows.len(), 5);
    assert!(rest.next.is_none());

    let tools = &sessions[6];
    let conversation = history.store().conversation(&tools.id).unwrap().unwrap();
    assert_eq!(conversation.items, pane_view(&read("tools.jsonl")).items);
    let items = history.items_page(&tools.id, None, 4).unwrap().unwrap();
    assert_eq!(items.row.items, 10);
    assert_eq!(items.items, conversation.items[..4]);
    let more = history.items_page(&tools.id, items.next.as_ref(), 50).unwrap().unwrap();
    assert_eq!(more.items, conversation.items[4..]);
    assert!(more.next.is_none());
}

#[test]
fn pi_session_marked_live_is_an_open_row_without_an_end() {
    // A copy of a fixture, marked live: its row is open, without an end.
    let dir = std::env::temp_dir().join(format!("durable-pi-fixture-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures().join("plain.jsonl"), dir.join("plain.jsonl")).unwrap();
    let history = PiHistory::new(SessionFolder::new(&dir));
    let id = read("plain.jsonl").header().unwrap().id.clone();
    history.set_open(&id, true);
    let rows: HashMap<String, _> =
        history.rows_page(None, 10).unwrap().rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    assert_eq!(rows[&id].state, ConversationState::Open);
    assert_eq!(rows[&id].ended_at, None);
    assert_eq!(rows[&id].title, "hello there");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pi reads back a line holding half of an emoji (`JSON.stringify` writes
/// a lone surrogate escape, `JSON.parse` takes it) and its next entries
/// name it as their parent: it is read too, the half as U+FFFD, and the
/// branch shown goes on through it.
#[test]
fn a_line_with_half_an_emoji_is_read_and_the_branch_goes_on_through_it() {
    let text = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T05:00:00.000Z","cwd":"/p"}"#,
        r#"{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":"first question"}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":[{"type":"text","text":"half an emoji \ud83d"}],"stopReason":"length"}}"#,
        r#"{"type":"message","id":"u2","parentId":"a1","message":{"role":"user","content":"second question"}}"#,
    ]
    .join("\n");
    let session = Session::parse(text.as_bytes());
    assert_eq!(session.malformed(), 0);
    let view = pane_view(&session);
    let ids: Vec<&str> = view.items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["pi-u1-0", "pi-a1-0", "pi-u2-0"]);
    assert!(matches!(&view.items[1].body, ItemBody::Reply { text, .. } if text == "half an emoji \u{fffd}"));
}

/// Every page of `id`'s items, `limit` at a time, following the cursors.
fn every_item(history: &PiHistory, id: &str, limit: usize) -> (Vec<Item>, u64) {
    let (mut items, mut after, mut total) = (Vec::new(), None, 0);
    loop {
        let page = history.items_page(id, after.as_ref(), limit).unwrap().unwrap();
        total = total.max(page.row.items);
        items.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => return (items, total),
        }
    }
}

fn copy_of_fixtures(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("durable-pi-fixture-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sessions = dir.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            std::fs::copy(&path, sessions.join(path.file_name().unwrap())).unwrap();
        }
    }
    (dir.clone(), sessions)
}

#[test]
fn pi_history_item_pages_are_the_whole_conversations_with_an_index_or_without() {
    let (dir, sessions) = copy_of_fixtures("pages");
    let index = dir.join("sessions-index.json");
    for folder in [SessionFolder::new(&sessions), SessionFolder::with_index(&sessions, &index)] {
        let history = PiHistory::new(folder);
        let ids: Vec<String> = history.store().sessions().unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(ids.len(), 8);
        for id in &ids {
            let whole = history.store().conversation(id).unwrap().unwrap();
            for limit in [1, 3, 50] {
                let (items, total) = every_item(&history, id, limit);
                assert_eq!(items, whole.items, "{id}, {limit} a page");
                assert_eq!(total, whole.items.len() as u64);
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pi_history_item_pages_follow_what_pi_appends() {
    let (dir, sessions) = copy_of_fixtures("appends");
    let history = PiHistory::new(SessionFolder::with_index(&sessions, dir.join("sessions-index.json")));
    let path = sessions.join("tools.jsonl");
    let id = read("tools.jsonl").header().unwrap().id.clone();
    let (before, _) = every_item(&history, &id, 4);
    assert_eq!(before.len(), 10);
    // Pi appends a turn; the history's next page has it (the row and the items).
    let leaf = Session::read(&path).unwrap().leaf().unwrap().id.clone();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(
        file,
        r#"{{"type":"message","id":"later1","parentId":"{leaf}","message":{{"role":"user","content":"one more","timestamp":1796200000000}}}}"#
    )
    .unwrap();
    writeln!(
        file,
        r#"{{"type":"message","id":"later2","parentId":"later1","message":{{"role":"assistant","content":[{{"type":"text","text":"sure"}}],"stopReason":"stop","timestamp":1796200000001}}}}"#
    )
    .unwrap();
    let page = history.items_page(&id, None, 50).unwrap().unwrap();
    assert_eq!(page.row.items, 12);
    assert_eq!(page.items[..10], before[..]);
    assert_eq!(lines(&page.items[10..]), ["user: one more", "reply: sure"]);
    assert_eq!(page.items, history.store().conversation(&id).unwrap().unwrap().items);
    std::fs::remove_dir_all(&dir).unwrap();
}
