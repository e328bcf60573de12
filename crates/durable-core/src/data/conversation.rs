//! A pane's conversation as the receipt store keeps it: what the phone was
//! shown (the program's items as last written, the user items of sends,
//! the SDK's own notices and closing lines) and the pane's title, so that
//! a pane declared again after a restart comes back with its items.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use durable_types::{Id, Item, Timestamp};

/// Items a store keeps per conversation: the view's own bound (§6, 2,000).
/// Past it the oldest are dropped and the conversation says so
/// ([`KeptConversation::dropped`]).
pub const KEPT_ITEMS_PER_CONVERSATION: usize = durable_types::VIEW_LIMIT;

/// Conversations a store that outlives the process keeps by default (the
/// SQLite and PostgreSQL stores): past it, the one written to least
/// recently is forgotten whole, so that the store never grows without
/// bound (at most this many times [`KEPT_ITEMS_PER_CONVERSATION`] items).
pub const KEPT_CONVERSATIONS: usize = 10_000;

/// One change to a kept conversation, in the order the pane saw it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConversationOp {
    /// An item as last written: it replaces the conversation's item of the
    /// same id in place, or goes at its end.
    Item {
        /// The pane id, which names the conversation.
        pane: String,
        /// The item, as the phone was shown it.
        item: Arc<Item>,
    },
    /// The pane's title (declared or renamed).
    Title {
        /// The pane id.
        pane: String,
        /// Its title.
        title: String,
        /// The phone gave it (a rename from the phone), not the program.
        by_phone: bool,
    },
    /// Forget the conversation (the program deleted it).
    Forget {
        /// The pane id.
        pane: String,
    },
}

impl ConversationOp {
    /// An item of `pane`'s conversation, as last written.
    pub fn item(pane: impl Into<String>, item: Item) -> Self {
        ConversationOp::Item { pane: pane.into(), item: Arc::new(item) }
    }

    /// `pane`'s title, as the program named it.
    pub fn title(pane: impl Into<String>, title: impl Into<String>) -> Self {
        ConversationOp::Title { pane: pane.into(), title: title.into(), by_phone: false }
    }

    /// `pane`'s title, as the phone renamed it.
    pub fn title_from_phone(pane: impl Into<String>, title: impl Into<String>) -> Self {
        ConversationOp::Title { pane: pane.into(), title: title.into(), by_phone: true }
    }

    /// Forget `pane`'s conversation.
    pub fn forget(pane: impl Into<String>) -> Self {
        ConversationOp::Forget { pane: pane.into() }
    }

    /// The pane whose conversation this changes.
    pub fn pane(&self) -> &str {
        match self {
            ConversationOp::Item { pane, .. }
            | ConversationOp::Title { pane, .. }
            | ConversationOp::Forget { pane } => pane,
        }
    }
}

/// What a store kept of a pane's conversation.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct KeptConversation {
    /// The last title kept (the program's declared title still wins: this
    /// one is for the pane's history row).
    pub title: Option<String>,
    /// The phone gave that title (it is offered back to the program's
    /// rename hook as the pane is declared again).
    pub title_by_phone: bool,
    /// The items, oldest first, each as last written.
    pub items: Vec<Item>,
    /// Whether older items were dropped (the store's bound per
    /// conversation).
    pub dropped: bool,
    /// When the store first kept something of it (`None`: a store that
    /// does not say).
    pub started_at: Option<Timestamp>,
    /// When the store last kept a change of it (`None`: a store that does
    /// not say).
    pub written_at: Option<Timestamp>,
}

impl KeptConversation {
    /// A conversation of these items, oldest first.
    pub fn new(title: Option<String>, items: Vec<Item>, dropped: bool) -> Self {
        KeptConversation { title, title_by_phone: false, items, dropped, started_at: None, written_at: None }
    }

    /// The same, saying when the store first and last kept something of it.
    #[must_use]
    pub fn with_times(mut self, started_at: Timestamp, written_at: Timestamp) -> Self {
        self.started_at = Some(started_at);
        self.written_at = Some(written_at);
        self
    }

    /// The same, saying whether the phone gave its title.
    #[must_use]
    pub fn with_title_by_phone(mut self, by_phone: bool) -> Self {
        self.title_by_phone = by_phone;
        self
    }
}

/// One conversation a store keeps, as history lists it
/// (the receipt store's `conversation_rows`):
/// the rows come newest first, by when each started.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeptConversationRow {
    /// The pane id, which names the conversation.
    pub pane: String,
    /// The last title kept.
    pub title: Option<String>,
    /// When the store first kept something of it.
    pub started_at: Timestamp,
    /// When the store last kept a change of it.
    pub written_at: Timestamp,
    /// How many items it keeps.
    pub items: u64,
}

impl KeptConversationRow {
    /// A row: the pane, its title, when it started and was last written,
    /// and how many items are kept.
    pub fn new(
        pane: impl Into<String>,
        title: Option<String>,
        started_at: Timestamp,
        written_at: Timestamp,
        items: u64,
    ) -> Self {
        KeptConversationRow { pane: pane.into(), title, started_at, written_at, items }
    }

    /// Where a page that ends with this row goes on from.
    pub fn place(&self) -> RowPlace {
        RowPlace { started_at: self.started_at, pane: self.pane.clone() }
    }
}

/// A place in the list of kept conversations (newest first, by start time,
/// then by pane id, descending): the rows after it are those that started
/// earlier, or at the same time under a lower pane id. Conversations that
/// start later go before it, so a reader paging on misses none it was
/// shown the start of, and sees none twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowPlace {
    /// The start time of the last row read.
    pub started_at: Timestamp,
    /// Its pane id.
    pub pane: String,
}

impl RowPlace {
    /// Whether a conversation that started at `started_at` under `pane`
    /// comes after this place in the list.
    pub fn is_before(&self, started_at: Timestamp, pane: &str) -> bool {
        (started_at, pane) < (self.started_at, self.pane.as_str())
    }
}

/// Items in order of first appearance, each as last written, the newest
/// `limit` kept: a pane's view, and a store's kept conversation. An item
/// written again under a known id replaces the earlier one in its place.
/// A place is the item's order of first appearance: it holds while items
/// are appended, rewritten in place or dropped from the front.
#[derive(Debug, Clone)]
pub struct ItemsInOrder {
    items: BTreeMap<u64, Arc<Item>>,
    places: HashMap<Id, u64>,
    next: u64,
    dropped: bool,
    limit: usize,
}

impl ItemsInOrder {
    /// No items yet; at most `limit` kept (at least 1).
    pub fn new(limit: usize) -> Self {
        ItemsInOrder {
            items: BTreeMap::new(),
            places: HashMap::new(),
            next: 0,
            dropped: false,
            limit: limit.max(1),
        }
    }

    /// Puts an item in its place (a known id) or at the end, dropping the
    /// oldest past the limit.
    pub fn put(&mut self, item: Arc<Item>) {
        if let Some(place) = self.places.get(&item.id) {
            self.items.insert(*place, item);
            return;
        }
        self.next += 1;
        self.places.insert(item.id.clone(), self.next);
        self.items.insert(self.next, item);
        while self.items.len() > self.limit {
            if let Some((_, old)) = self.items.pop_first() {
                self.places.remove(&old.id);
                self.dropped = true;
            }
        }
    }

    /// Takes every item out, in order. Places go on counting (and whether
    /// older items were dropped is kept): a place handed out before is
    /// below every place given after, so a reader paging from it reads the
    /// items put back from their start, and misses none.
    pub fn take_all(&mut self) -> Vec<Arc<Item>> {
        self.places.clear();
        std::mem::take(&mut self.items).into_values().collect()
    }

    /// Marks that older items are no longer kept.
    pub fn mark_dropped(&mut self) {
        self.dropped = true;
    }

    /// Whether older items are no longer kept.
    pub fn dropped(&self) -> bool {
        self.dropped
    }

    /// How many items are kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Item>> {
        self.items.values()
    }

    /// The items whose place comes after `place`, with their places.
    pub fn after(&self, place: u64) -> impl Iterator<Item = (u64, &Arc<Item>)> {
        self.items.range(place.saturating_add(1)..).map(|(p, i)| (*p, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> Arc<Item> {
        Arc::new(Item::reply(id, id.to_uppercase()).unwrap())
    }

    fn ids(items: &ItemsInOrder, after: u64) -> Vec<String> {
        items.after(after).map(|(_, i)| i.id.to_string()).collect()
    }

    #[test]
    fn an_item_written_again_keeps_its_place_and_the_oldest_go_past_the_limit() {
        let mut items = ItemsInOrder::new(3);
        for id in ["a", "b", "c"] {
            items.put(item(id));
        }
        items.put(Arc::new(Item::reply("a", "again").unwrap()));
        assert_eq!(ids(&items, 0), ["a", "b", "c"]);
        items.put(item("d"));
        assert_eq!((ids(&items, 0), items.dropped()), (vec!["b".into(), "c".into(), "d".into()], true));
    }

    #[test]
    fn places_handed_out_before_a_take_all_are_below_every_place_after_it() {
        let mut items = ItemsInOrder::new(10);
        items.put(item("a"));
        items.put(item("b"));
        let (read_up_to, _) = items.after(0).next().unwrap(); // a reader paged one item
        let taken = items.take_all();
        for id in ["k1", "k2"] {
            items.put(item(id));
        }
        for i in taken {
            items.put(i);
        }
        assert_eq!(
            ids(&items, read_up_to),
            ["k1", "k2", "a", "b"],
            "a cursor from before reads everything put back"
        );
    }
}
