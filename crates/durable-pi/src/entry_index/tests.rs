//! A page read through the entry index is the page of the whole file read
//! and mapped ([`pane_view`]), for the real Pi's fixtures and for generated
//! sessions (branches, tool calls and their results, every entry type,
//! damaged lines, legacy files); the index follows appends and is built
//! again after a rewrite, a cut or damage.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use super::cache::EntryIndexes;
use super::{EntryIndex, disk};
use crate::folder::SessionSummary;
use crate::items::pane_view;
use crate::session::Session;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durable-pi-entry-index-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn build(file: &mut std::fs::File) -> EntryIndex {
    let meta = file.metadata().unwrap();
    EntryIndex::build(file, &meta).unwrap()
}

fn refresh(index: &mut EntryIndex, file: &mut std::fs::File) -> Result<(), super::Stale> {
    let meta = file.metadata().unwrap();
    index.refresh(file, &meta).unwrap()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every page of `path` of `limit` items, through `indexes` and from the
/// whole file, and the summaries, are the same.
fn assert_pages_match(indexes: &EntryIndexes, path: &Path, what: &str) {
    let session = Session::parse(&std::fs::read(path).unwrap());
    if !session.is_session() {
        assert!(indexes.page(path, 0..5).is_err(), "{what}: not a session");
        return;
    }
    let all = pane_view(&session).items;
    let want = SessionSummary::of(path, &session, None).unwrap();
    for limit in [1, 2, 3, 7, 50] {
        let mut start = 0;
        loop {
            let (summary, items) = indexes.page(path, start..start + limit).unwrap();
            assert_eq!(summary, SessionSummary { items: all.len() as u64, ..want.clone() }, "{what}");
            let end = (start + limit).min(all.len());
            assert_eq!(items, all[start.min(end)..end], "{what}: items {start}..{end} of {}", all.len());
            if end >= all.len() {
                break;
            }
            start = end;
        }
    }
    let (_, past) = indexes.page(path, all.len() + 3..all.len() + 10).unwrap();
    assert!(past.is_empty(), "{what}: a page past the end is empty");
}

#[test]
fn pages_through_the_index_are_the_pages_of_the_whole_file_for_every_fixture() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.push(fixtures().join("torn/tools-torn.jsonl"));
    assert!(files.len() >= 9, "{files:?}");
    let indexes = EntryIndexes::new(None);
    for file in &files {
        assert_pages_match(&indexes, file, &file.display().to_string());
    }
}

/// A small random number generator (xorshift64*), so that a failing seed
/// can be run again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len())]
    }
}

/// A session file of about `entries` lines: branches, tool calls (their
/// ids reused, their results on and off the branch), every entry type,
/// missing and looping parents, repeated ids, malformed and blank lines;
/// one in five a legacy (version 1) file.
fn generate(seed: u64, entries: usize) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let legacy = rng.below(5) == 0;
    let version = if legacy { "" } else { r#","version":3"# };
    let mut out =
        format!(r#"{{"type":"session"{version},"id":"s{seed}","timestamp":"2026-12-01T05:00:00.000Z"}}"#);
    out.push('\n');
    let mut ids: Vec<String> = Vec::new();
    let calls = ["c1", "c2", "c3", "c4", "c5"];
    for n in 0..entries {
        let id = match rng.below(40) {
            0 if !ids.is_empty() => ids[rng.below(ids.len())].clone(), // an id again
            _ => format!("e{n}"),
        };
        let parent = match (ids.last(), rng.below(12)) {
            (None, _) | (_, 0) => "null".to_owned(),
            (Some(_), 1) => format!("\"{}\"", ids[rng.below(ids.len())]), // a branch
            (Some(_), 2) if rng.below(4) == 0 => "\"gone\"".to_owned(),
            (Some(_), 3) if rng.below(4) == 0 => format!("\"{id}\""), // itself
            (Some(last), _) => format!("\"{last}\""),
        };
        let ms = 1_796_100_000_000u64 + n as u64 * 1000;
        let head = if legacy && rng.below(2) == 0 {
            String::new() // no id: a legacy file gives one by position
        } else {
            format!(r#""id":"{id}","parentId":{parent},"#)
        };
        let ts = if rng.below(10) == 0 {
            String::new()
        } else {
            format!(r#","timestamp":"2026-12-01T05:00:{:02}.000Z""#, n % 60)
        };
        let body = match rng.below(16) {
            0..=3 => {
                let text = rng.pick(&["hello", "  ", "fix the build", ""]);
                format!(
                    r#""type":"message"{ts},"message":{{"role":"user","content":"{text}","timestamp":{ms}}}"#
                )
            }
            4..=7 => {
                let mut blocks = Vec::new();
                for _ in 0..rng.below(4) {
                    blocks.push(match rng.below(5) {
                        0 => format!(r#"{{"type":"text","text":"{}"}}"#, rng.pick(&["reply", " ", "done"])),
                        1 => format!(r#"{{"type":"thinking","thinking":"{}"}}"#, rng.pick(&["hmm", ""])),
                        2 => r#"{"type":"thinking","thinking":"","redacted":true}"#.to_owned(),
                        _ => format!(
                            r#"{{"type":"toolCall","id":"{}","name":"bash","arguments":{{"command":"ls {n}"}}}}"#,
                            rng.pick(&calls)
                        ),
                    });
                }
                let stop = rng.pick(&["stop", "toolUse", "error", "aborted", "length"]);
                format!(
                    r#""type":"message"{ts},"message":{{"role":"assistant","content":[{}],"stopReason":"{stop}","timestamp":{ms}}}"#,
                    blocks.join(",")
                )
            }
            8..=9 => format!(
                r#""type":"message"{ts},"message":{{"role":"toolResult","toolCallId":"{}","toolName":"bash","content":[{{"type":"text","text":"out {n}"}}],"isError":{}}}"#,
                rng.pick(&["c1", "c2", "c3", "c4", "c5", "lost"]),
                rng.below(2) == 0
            ),
            10 => format!(r#""type":"compaction"{ts},"summary":"sum {n}","firstKeptEntryId":"e0""#),
            11 => format!(r#""type":"branch_summary"{ts},"summary":"left {n}","fromId":"e1""#),
            12 => format!(
                r#""type":"custom_message"{ts},"customType":"x","content":"note {n}","display":{}"#,
                rng.below(2) == 0
            ),
            13 => format!(r#""type":"session_info"{ts},"name":"{}""#, rng.pick(&["Work", " ", "Other"])),
            14 => format!(r#""type":"label"{ts},"targetId":"e0","label":"l""#),
            _ => format!(r#""type":"{}"{ts}"#, rng.pick(&["model_change", "what_next", "usage"])),
        };
        match rng.below(30) {
            0 => out.push_str("{not json\n"),
            1 => out.push('\n'),
            2 => out.push_str("{\"type\":\"message\",\"parentId\":null}\n"), // no id
            3 => out.push_str("{\"type\":\"session\",\"id\":\"again\"}\n"),
            _ => {}
        }
        out.push_str(&format!("{{{head}{body}}}\n"));
        ids.push(if head.is_empty() { format!("line-{}", ids.len()) } else { id });
    }
    match rng.below(4) {
        0 => {
            out.pop(); // the last line without its newline
        }
        1 => out.push_str(r#"{"type":"message","id":"torn","par"#),
        _ => {}
    }
    out
}

#[test]
fn pages_through_the_index_are_the_pages_of_the_whole_file_for_generated_sessions() {
    let dir = temp("generated");
    let indexes = EntryIndexes::new(None);
    for seed in 0..150u64 {
        let path = dir.join(format!("{seed}.jsonl"));
        let text = generate(seed, 5 + (seed as usize * 7) % 120);
        std::fs::write(&path, &text).unwrap();
        assert_pages_match(&indexes, &path, &format!("seed {seed}"));
    }
}

#[test]
fn what_pi_appends_is_read_from_where_the_index_ends() {
    let dir = temp("appends");
    let path = dir.join("s.jsonl");
    let text = generate(7, 200);
    let cut = text.len() / 2 + text[text.len() / 2..].find('\n').unwrap() + 1;
    std::fs::write(&path, &text[..cut]).unwrap();
    let indexes = EntryIndexes::new(None);
    assert_pages_match(&indexes, &path, "first half");
    // Pi appends the rest, in pieces, one ending half way through a line.
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let rest = &text[cut..];
    let middle = rest.len() / 2;
    file.write_all(&rest.as_bytes()[..middle]).unwrap();
    assert_pages_match(&indexes, &path, "a line half written");
    file.write_all(&rest.as_bytes()[middle..]).unwrap();
    assert_pages_match(&indexes, &path, "all of it");
}

/// Rewrites the bytes at `at` keeping the file's length and modification
/// time: only a reader that reads them again sees it.
fn overwrite_keeping_size_and_time(path: &Path, at: usize, bytes: &[u8]) {
    let meta = std::fs::metadata(path).unwrap();
    let mut text = std::fs::read(path).unwrap();
    text[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, &text).unwrap();
    std::fs::File::options().write(true).open(path).unwrap().set_modified(meta.modified().unwrap()).unwrap();
}

/// A conversation of `pairs` user messages and replies, one line each.
fn conversation(pairs: usize) -> String {
    let mut out =
        r#"{"type":"session","version":3,"id":"long","timestamp":"2026-12-01T05:00:00.000Z"}"#.to_owned();
    out.push('\n');
    let mut parent = "null".to_owned();
    for p in 0..pairs {
        for (role, content) in [
            ("user", format!(r#""question {p}""#)),
            ("assistant", format!(r#"[{{"type":"text","text":"answer {p}"}}]"#)),
        ] {
            let id = format!("{role}-{p:05}");
            out.push_str(&format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"message":{{"role":"{role}","content":{content},"stopReason":"stop"}}}}"#
            ));
            out.push('\n');
            parent = format!("\"{id}\"");
        }
    }
    out
}

fn texts(items: &[durable_types::Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match &i.body {
            durable_types::ItemBody::User { text, .. } | durable_types::ItemBody::Reply { text, .. } => {
                text.clone()
            }
            other => other.kind().to_owned(),
        })
        .collect()
}

#[test]
fn a_page_reads_only_its_entries() {
    let dir = temp("only");
    let path = dir.join("s.jsonl");
    let text = conversation(500);
    std::fs::write(&path, &text).unwrap();
    let indexes = EntryIndexes::new(None);
    assert_eq!(texts(&indexes.page(&path, 0..2).unwrap().1), ["question 0", "answer 0"]);
    // An entry in the middle is damaged where it is, the file's length and
    // time kept: a page that does not show it does not read it.
    let middle = text.find("answer 250").unwrap();
    overwrite_keeping_size_and_time(&path, middle - 20, b"#####");
    let (summary, items) = indexes.page(&path, 998..1000).unwrap();
    assert_eq!(texts(&items), ["question 499", "answer 499"]);
    assert_eq!(summary.items, 1000, "the index as it was: the damage not read");
    // The page that shows it reads it, finds it is not the entry indexed,
    // and the index is built again: the page is the whole file's.
    indexes.page(&path, 501..502).unwrap();
    assert_eq!(indexes.page(&path, 0..1).unwrap().0.items, whole_file_items(&path));
    assert_ne!(whole_file_items(&path), 1000);
    assert_pages_match(&indexes, &path, "damaged in the middle");
}

/// How many items the whole file's branch gives.
fn whole_file_items(path: &Path) -> u64 {
    pane_view(&Session::read(path).unwrap()).items.len() as u64
}

#[test]
fn a_file_rewritten_or_cut_shorter_is_indexed_again() {
    let dir = temp("rewritten");
    let path = dir.join("s.jsonl");
    std::fs::write(&path, conversation(40)).unwrap();
    let indexes = EntryIndexes::new(None);
    assert_pages_match(&indexes, &path, "first");
    // Cut shorter.
    std::fs::write(&path, conversation(10)).unwrap();
    assert_pages_match(&indexes, &path, "cut");
    // Rewritten longer, with another start (Pi's migration rewrites a file).
    std::fs::write(&path, conversation(30).replace("\"long\"", "\"other\"")).unwrap();
    assert_pages_match(&indexes, &path, "rewritten");
    // Rewritten longer, the start kept, the last line indexed changed (its
    // reply blanked, the same length): what was indexed is not
    // taken as it was, even by a page that does not read that line.
    let mut text = conversation(30).replace("\"long\"", "\"other\"").replace("answer 29", "         ");
    text.push_str(
        r#"{"type":"message","id":"user-00030","parentId":"assistant-00029","message":{"role":"user","content":"question 30"}}"#,
    );
    text.push('\n');
    std::fs::write(&path, &text).unwrap();
    assert_eq!(indexes.page(&path, 0..1).unwrap().0.items, 60, "59 before, 1 appended");
    assert_pages_match(&indexes, &path, "rewritten at its end");
    // Not a session any more.
    std::fs::write(&path, "{\"type\":\"message\"}\n").unwrap();
    assert!(matches!(indexes.page(&path, 0..5), Err(crate::Error::NotASession { .. })));
}

#[test]
fn indexes_of_long_sessions_are_kept_on_disk_and_a_damaged_one_is_built_again() {
    let dir = temp("disk");
    let path = dir.join("2026-12-01T05-00-00-000Z_long.jsonl");
    let text = conversation(600);
    std::fs::write(&path, &text).unwrap();
    let kept = dir.join("entries");
    let indexes = EntryIndexes::new(Some(kept.clone()));
    indexes.page(&path, 0..10).unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(&kept).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one index for the long session");

    // What is on disk is the index as built.
    let mut file = std::fs::File::open(&path).unwrap();
    let built = build(&mut file);
    let name = path.file_name().unwrap().to_str().unwrap();
    let loaded = disk::load(&files[0], name).expect("read back");
    assert_eq!(loaded, EntryIndex { saved: Some(built.len()), ..built });
    assert!(disk::load(&files[0], "another.jsonl").is_none(), "another file's index is not taken");

    // A later run reads the index from disk, not the session file: a middle
    // entry damaged in place goes unseen by a page that does not show it.
    overwrite_keeping_size_and_time(&path, text.find("answer 300").unwrap() - 20, b"#####");
    let later = EntryIndexes::new(Some(kept.clone()));
    assert_eq!(later.page(&path, 0..1).unwrap().0.items, 1200);

    // A damaged index (cut, or a byte changed) is not trusted: the session
    // file is read again.
    let bytes = std::fs::read(&files[0]).unwrap();
    for damaged in [
        bytes[..bytes.len() / 2].to_vec(),
        {
            let mut b = bytes.clone();
            b[bytes.len() / 3] ^= 0x40;
            b
        },
        Vec::new(),
    ] {
        std::fs::write(&files[0], &damaged).unwrap();
        assert!(disk::load(&files[0], name).is_none());
        let again = EntryIndexes::new(Some(kept.clone()));
        let items = again.page(&path, 0..1).unwrap().0.items;
        assert_eq!(items, whole_file_items(&path), "the file read again, its damage seen");
        assert_ne!(items, 1200);
        assert_pages_match(&again, &path, "after a damaged index");
    }
    // A file that is gone takes its index with it.
    let again = EntryIndexes::new(Some(kept.clone()));
    again.page(&path, 0..1).unwrap();
    again.forget(&path);
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 0);
}

#[test]
fn memory_holds_a_few_indexes_whatever_was_read() {
    let dir = temp("held");
    let indexes = EntryIndexes::new(None);
    for n in 0..30 {
        let path = dir.join(format!("{n}.jsonl"));
        std::fs::write(&path, conversation(50)).unwrap();
        indexes.page(&path, 0..10).unwrap();
    }
    let (files, entries) = indexes.held();
    assert_eq!((files, entries), (8, 800), "the eight read last");
}

#[test]
fn bytes_that_are_not_an_index_never_panic_the_reader() {
    let dir = temp("fuzz");
    let path = dir.join("s.jsonl");
    std::fs::write(&path, generate(3, 60)).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let index = build(&mut file);
    let kept = dir.join("s.idx");
    disk::save(&kept, "s.jsonl", &index).unwrap();
    let bytes = std::fs::read(&kept).unwrap();
    let mut rng = Rng(42);
    for _ in 0..2000 {
        let mut b = bytes.clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(b.len());
            b[at] = rng.next() as u8;
        }
        b.truncate(b.len() - rng.below(3) * rng.below(b.len()) / 2);
        std::fs::write(&kept, &b).unwrap();
        let _ = disk::load(&kept, "s.jsonl");
    }
    // And a file whose digest matches but whose numbers lie is refused too.
    let _ = std::fs::remove_file(&kept);
    let mut lying = index.clone();
    lying.entries[3].offset = u64::MAX - 3;
    disk::save(&kept, "s.jsonl", &lying).unwrap();
    assert!(disk::load(&kept, "s.jsonl").is_none());
}

#[test]
fn an_unchanged_file_keeps_its_stamp_and_a_touched_one_is_checked_not_rebuilt() {
    let dir = temp("stamp");
    let path = dir.join("s.jsonl");
    std::fs::write(&path, conversation(20)).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let mut index = build(&mut file);
    let before = index.clone();
    assert!(refresh(&mut index, &mut file).is_ok());
    assert_eq!(index, before);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    assert!(refresh(&mut index, &mut file).is_ok());
    assert_eq!(index.entries, before.entries, "same bytes: nothing read again");
}
