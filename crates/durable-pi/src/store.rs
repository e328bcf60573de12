//! The store behind the history: [`ConversationStore`], what any reader of
//! an agent's saved conversations gives. A Pi sessions folder
//! ([`SessionFolder`](crate::SessionFolder)) implements it; a reader of Pi
//! Durable's storage (one `main.jsonl` of commits holding every conversation
//! and entry) would implement it beside it, and the history
//! ([`PiHistory`](crate::PiHistory)) serves either.

use std::ops::Range;

use durable_types::{Item, Timestamp};

use crate::Error;

/// What a list of conversations shows of one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConversationInfo {
    /// The conversation's id (a session id), stable across reads.
    pub id: String,
    /// The name the user gave it, if any.
    pub name: Option<String>,
    /// The text of its first user message, if any.
    pub first_user_text: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// Its latest activity (the list is ordered by it, newest first).
    pub last_activity: Timestamp,
    /// How many items its pane shows.
    pub items: u64,
}

impl ConversationInfo {
    /// A conversation that started (and was last active) at `started_at`,
    /// with no name, no user text and no items yet.
    pub fn new(id: impl Into<String>, started_at: Timestamp) -> Self {
        ConversationInfo {
            id: id.into(),
            name: None,
            first_user_text: None,
            started_at,
            last_activity: started_at,
            items: 0,
        }
    }

    /// With a name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// With the text of the first user message.
    pub fn with_first_user_text(mut self, text: impl Into<String>) -> Self {
        self.first_user_text = Some(text.into());
        self
    }

    /// With the latest activity.
    pub fn with_last_activity(mut self, at: Timestamp) -> Self {
        self.last_activity = at;
        self
    }

    /// With the number of items.
    pub fn with_items(mut self, items: u64) -> Self {
        self.items = items;
        self
    }

    /// The title a list shows: the name, else the first user text on one
    /// line, else `(no messages)` (as Pi's own session list does). Never
    /// empty: a blank name or first text (white space, invisible
    /// characters) falls through to the next, as the layout refuses an
    /// empty title.
    ///
    /// ```
    /// use durable_sdk::pi::ConversationInfo;
    /// use durable_sdk::types::Timestamp;
    /// let info = ConversationInfo::new("s1", Timestamp::EPOCH).with_first_user_text("fix\n  the build");
    /// assert_eq!(info.title(), "fix the build");
    /// assert_eq!(info.clone().with_name("Build").title(), "Build");
    /// assert_eq!(info.with_name(" \u{200b} ").title(), "fix the build");
    /// let blank = ConversationInfo::new("s2", Timestamp::EPOCH).with_first_user_text("  \n ");
    /// assert_eq!(blank.title(), "(no messages)");
    /// ```
    pub fn title(&self) -> String {
        // A title is never empty (the layout refuses one): a blank name
        // or first message falls through to the next.
        let blank = |t: &str| {
            durable_types::text::is_blank(&durable_types::text::clean_line(t, durable_types::TITLE_MAX).text)
        };
        if let Some(name) = self.name.as_deref().filter(|n| !blank(n)) {
            return name.to_owned();
        }
        match self.first_user_text.as_deref().map(|t| t.split_whitespace().collect::<Vec<_>>().join(" ")) {
            Some(text) if !blank(&text) => text,
            _ => "(no messages)".to_owned(),
        }
    }
}

/// One conversation: what the list shows of it, and its items in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Conversation {
    /// What the list shows.
    pub info: ConversationInfo,
    /// The items of its pane, in order.
    pub items: Vec<Item>,
}

impl Conversation {
    /// A conversation.
    pub fn new(info: ConversationInfo, items: Vec<Item>) -> Self {
        Conversation { info, items }
    }
}

/// An agent's saved conversations, read-only (the agent owns them).
///
/// ```
/// use durable_sdk::pi::{Conversation, ConversationInfo, ConversationStore, Error};
/// use durable_sdk::types::Timestamp;
///
/// /// A store of one conversation, as a test might use.
/// struct One(ConversationInfo);
/// impl ConversationStore for One {
///     fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
///         Ok(vec![self.0.clone()])
///     }
///     fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
///         Ok((id == self.0.id).then(|| Conversation::new(self.0.clone(), Vec::new())))
///     }
/// }
/// let store = One(ConversationInfo::new("c1", Timestamp::EPOCH));
/// assert_eq!(store.conversations()?.len(), 1);
/// assert!(store.conversation("c2")?.is_none());
/// # Ok::<(), Error>(())
/// ```
pub trait ConversationStore: Send + Sync + 'static {
    /// Every conversation, one per id.
    fn conversations(&self) -> Result<Vec<ConversationInfo>, Error>;
    /// One conversation with its items; `None` for an unknown id.
    fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error>;
    /// What a list shows of one conversation now; `None` for an unknown id.
    /// The history asks it at each page of the conversations open as panes,
    /// so that they show as they are while the listing it keeps catches up.
    /// By default, [`conversation`](Self::conversation)'s info.
    fn info(&self, id: &str) -> Result<Option<ConversationInfo>, Error> {
        Ok(self.conversation(id)?.map(|c| c.info))
    }
    /// The first `n` conversations of [`conversations`](Self::conversations)
    /// newest first (latest activity, then id, descending; one per id),
    /// or every one when there are fewer than `n`, when the store can tell
    /// them without listing every conversation; `None` when it cannot now.
    /// The history asks it for a page asked before its first listing is
    /// done, and waits for that listing only when the page goes past these.
    /// By default `None`; a Pi sessions folder tells them at start from
    /// the rows its last listing found newest and the files changed since.
    fn newest_conversations(&self, n: usize) -> Result<Option<Vec<ConversationInfo>>, Error> {
        let _ = n;
        Ok(None)
    }
    /// A page of one conversation: the items at `range` of its pane (cut
    /// to its end), with what a list shows of it (its `items` counting them
    /// all); `None` for an unknown id. The history reads its item pages
    /// with it. By default, [`conversation`](Self::conversation)'s items,
    /// cut; a store that can read a part of a conversation reads only that
    /// part (a Pi sessions folder reads the entries the page shows).
    fn conversation_page(&self, id: &str, range: Range<usize>) -> Result<Option<Conversation>, Error> {
        Ok(self.conversation(id)?.map(|c| {
            let info = ConversationInfo { items: c.items.len() as u64, ..c.info };
            Conversation::new(info, c.items.into_iter().skip(range.start).take(range.len()).collect())
        }))
    }
}

/// A shared store is a store: an agent keeps one [`SessionFolder`](crate::SessionFolder)
/// (and its index) for its own listings and its history.
impl<T: ConversationStore> ConversationStore for std::sync::Arc<T> {
    fn conversations(&self) -> Result<Vec<ConversationInfo>, Error> {
        T::conversations(self)
    }
    fn conversation(&self, id: &str) -> Result<Option<Conversation>, Error> {
        T::conversation(self, id)
    }
    fn info(&self, id: &str) -> Result<Option<ConversationInfo>, Error> {
        T::info(self, id)
    }
    fn newest_conversations(&self, n: usize) -> Result<Option<Vec<ConversationInfo>>, Error> {
        T::newest_conversations(self, n)
    }
    fn conversation_page(&self, id: &str, range: Range<usize>) -> Result<Option<Conversation>, Error> {
        T::conversation_page(self, id, range)
    }
}
