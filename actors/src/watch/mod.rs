//! The watch hub: committed events fan out from here to every watcher, in revision order.

mod hub;
mod window;

use std::sync::Arc;

use crate::model::StoredObject;

pub use hub::{Bookmarks, HubHandle, HubOptions, Publish, Subscription, WatchHub};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The name used on the wire (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as the shards publish it. `previous` lets the hub turn a change that
/// moves an object in or out of a watcher's selector into ADDED or DELETED for that watcher.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Arc<StoredObject>,
    pub previous: Option<Arc<StoredObject>>,
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum WatchItem {
    Event(EventType, Arc<StoredObject>),
    /// Everything up to this revision has been delivered.
    Bookmark(u64),
    /// The watch ended abnormally; nothing follows.
    Error(WatchError),
}

/// Why a watch cannot start or had to end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: u64, oldest: u64 },
    #[error("watcher fell more than {0} events behind and was closed; re-list and watch again")]
    TooSlow(usize),
    #[error("watch hub is shutting down")]
    Unavailable,
}
