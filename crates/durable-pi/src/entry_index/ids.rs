//! The ids an entry index names (entries' and parents'), each once, by key:
//! one string holding them all, so that an index read from disk costs a
//! copy, not an allocation per id. The map from id to key is made only
//! when entries are added (a page needs none).

use std::collections::HashMap;

/// Ids by key.
#[derive(Debug, Clone, Default)]
pub(super) struct Ids {
    text: String,
    /// Where each id ends in `text`.
    ends: Vec<usize>,
    /// Key by id; `None` until an id is looked up.
    keys: Option<HashMap<Box<str>, usize>>,
}

/// Ids are the same when they give the same key to the same id.
impl PartialEq for Ids {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.ends == other.ends
    }
}

impl Ids {
    /// How many ids.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The id of a key (empty for a key it did not give).
    pub(super) fn get(&self, key: usize) -> &str {
        let start = key.checked_sub(1).and_then(|k| self.ends.get(k)).copied().unwrap_or(0);
        let end = self.ends.get(key).copied().unwrap_or(start);
        self.text.get(start..end).unwrap_or("")
    }

    /// Every id, by key.
    pub(super) fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|k| self.get(k))
    }

    /// Adds an id as read from disk, without looking whether it is there:
    /// its key is the next one.
    pub(super) fn push(&mut self, id: &str) {
        self.text.push_str(id);
        self.ends.push(self.text.len());
        if let Some(keys) = &mut self.keys {
            keys.insert(Box::from(id), self.ends.len() - 1);
        }
    }

    /// The key of an id, given one the first time it is seen; `true` when
    /// it is new.
    pub(super) fn key(&mut self, id: &str) -> (usize, bool) {
        if self.keys.is_none() {
            let keys = (0..self.len()).map(|k| (Box::from(self.get(k)), k)).collect();
            self.keys = Some(keys);
        }
        if let Some(&key) = self.keys.as_ref().and_then(|keys| keys.get(id)) {
            return (key, false);
        }
        self.push(id);
        (self.len() - 1, true)
    }
}
