//! A page of a conversation from its entry index: the branch is walked and
//! its items counted in the index; from the file, only the entries that
//! give the page's items, and the results of its tool calls, are read.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;

use durable_types::Item;

use super::{EntryIndex, Makes, Stale, read_at};
use crate::items::{Effect, effect, entry_item};
use crate::session::{Entry, Parsed, parse_line};

/// Entries closer than this in the file are read in one go.
const GAP_BYTES: u64 = 16 * 1024;
/// A read in one go stops growing past this (a single line may be longer).
const RUN_BYTES: u64 = 4 * 1024 * 1024;

/// Where the items of a range come from.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Items of the branch shown.
    pub(crate) total: usize,
    /// The entries that give items in the range, with their first item's
    /// position.
    gives: Vec<(usize, usize)>,
    /// For each tool item in the range that a result changes: the last such
    /// result and the item's position.
    results: Vec<(usize, usize)>,
}

/// Walks the branch shown and counts its items as
/// [`pane_view`](crate::pane_view) makes them: a tool result changes the
/// item of the latest call on the branch before it with its id, and is an
/// item of its own without one.
pub(crate) fn layout(index: &EntryIndex, range: Range<usize>) -> Layout {
    let mut layout = Layout::default();
    let mut calls: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<usize, usize> = HashMap::new();
    let overlaps = |first: usize, n: usize| n > 0 && first < range.end && first + n > range.start;
    for e in index.branch() {
        let first = layout.total;
        let gives = match &index.entries[e].makes {
            Makes::Items(n) => *n,
            Makes::WithCalls(n, ids) => {
                for (id, k) in ids.iter() {
                    calls.insert(id, first + k);
                }
                *n
            }
            Makes::Result(id) => match calls.get(&**id) {
                Some(&at) => {
                    if range.contains(&at) {
                        results.insert(at, e);
                    }
                    0
                }
                None => 1,
            },
        };
        if overlaps(first, gives) {
            layout.gives.push((e, first));
        }
        layout.total += gives;
    }
    layout.results = results.into_iter().map(|(at, e)| (e, at)).collect();
    layout
}

/// Why a page could not be read from the index.
#[derive(Debug)]
pub(crate) enum PageError {
    /// The file could not be read.
    Io(std::io::Error),
    /// An entry read at its place is not the one indexed.
    Stale,
}

impl From<std::io::Error> for PageError {
    fn from(e: std::io::Error) -> Self {
        PageError::Io(e)
    }
}

impl From<Stale> for PageError {
    fn from(_: Stale) -> Self {
        PageError::Stale
    }
}

/// The items at `range` of the branch shown (cut to its end), and how many
/// it has in all.
pub(crate) fn items(
    index: &EntryIndex,
    file: &mut File,
    range: Range<usize>,
) -> Result<(Vec<Item>, usize), PageError> {
    let layout = layout(index, range.clone());
    let (start, end) = (range.start.min(layout.total), range.end.min(layout.total));
    let mut wanted: Vec<usize> = layout.gives.iter().chain(&layout.results).map(|&(e, _)| e).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let entries = read_entries(index, file, &wanted)?;
    let mut slots: Vec<Option<Item>> = (start..end).map(|_| None).collect();
    let mut put = |at: usize, item: Option<Item>| {
        if (start..end).contains(&at) {
            slots[at - start] = item;
        }
    };
    for &(e, first) in &layout.gives {
        let entry = &entries[&e];
        match checked_effect(index, e, entry)? {
            Effect::Items(parts) => {
                for (k, part) in parts.into_iter().enumerate() {
                    put(first + k, entry_item(entry, part.n, part.body));
                }
            }
            Effect::Result(result) => put(first, entry_item(entry, 0, result.own_item())),
        }
    }
    for &(e, at) in &layout.results {
        let Effect::Result(result) = checked_effect(index, e, &entries[&e])? else {
            return Err(PageError::Stale);
        };
        match slots.get_mut(at - start) {
            Some(Some(item)) => result.apply(item),
            _ => return Err(PageError::Stale),
        }
    }
    let items = slots.into_iter().collect::<Option<Vec<Item>>>().ok_or(PageError::Stale)?;
    Ok((items, layout.total))
}

/// The entry's effect, when it is what the index says it gives.
fn checked_effect<'e>(index: &EntryIndex, e: usize, entry: &'e Entry) -> Result<Effect<'e>, Stale> {
    let effect = effect(entry);
    if Makes::of(&effect) == index.entries[e].makes { Ok(effect) } else { Err(Stale) }
}

/// Reads and parses these entries (positions in the file, ascending),
/// those near each other in one read; each must be the entry indexed there.
fn read_entries(
    index: &EntryIndex,
    file: &mut File,
    wanted: &[usize],
) -> Result<HashMap<usize, Entry>, PageError> {
    let mut out = HashMap::with_capacity(wanted.len());
    let mut i = 0;
    while i < wanted.len() {
        let run_start = index.entries[wanted[i]].offset;
        let mut j = i + 1;
        let mut run_end = end_of(index, wanted[i]);
        while let Some(&next) = wanted.get(j) {
            let at = index.entries[next].offset;
            if at.saturating_sub(run_end) > GAP_BYTES || end_of(index, next) - run_start > RUN_BYTES {
                break;
            }
            run_end = run_end.max(end_of(index, next));
            j += 1;
        }
        let bytes = read_at(file, run_start, usize::try_from(run_end - run_start).map_err(|_| Stale)?)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof { PageError::Stale } else { e.into() }
            })?;
        for &e in &wanted[i..j] {
            let indexed = &index.entries[e];
            let from = (indexed.offset - run_start) as usize;
            let line = &bytes[from..from + indexed.len as usize];
            out.insert(e, parse_entry_at(index, e, line)?);
        }
        i = j;
    }
    Ok(out)
}

/// The end of an entry's line in the file.
fn end_of(index: &EntryIndex, e: usize) -> u64 {
    let indexed = &index.entries[e];
    indexed.offset.saturating_add(indexed.len)
}

/// Parses the line of the `e`th entry as [`Session`](crate::Session) reads
/// it at that place; it must be the entry indexed (its id and parent).
fn parse_entry_at(index: &EntryIndex, e: usize, line: &[u8]) -> Result<Entry, Stale> {
    let previous = e.checked_sub(1).map(|p| index.ids.get(index.entries[p].key));
    let Parsed::Entry(entry) = parse_line(line, index.header.as_ref(), e, previous) else {
        return Err(Stale);
    };
    let indexed = &index.entries[e];
    let parent = indexed.parent.map(|p| index.ids.get(p));
    if entry.id != index.ids.get(indexed.key) || entry.parent_id.as_deref() != parent {
        return Err(Stale);
    }
    Ok(entry)
}
