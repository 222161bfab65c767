//! List-watch (an informer's feed): lists a resource, then watches from the list's revision,
//! re-listing after any watch error or end and backing off while the server is unreachable.
//! Components turn what it reports into messages to their actor.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::{ApiClient, ClientEvent};
use crate::core::{ApiError, ListOptions, WatchOptions};
use crate::model::ResourceType;
use crate::watch::EventType;

/// Longest wait between attempts to reach the API server.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// What a list-watch reports.
#[derive(Debug)]
pub enum Feed {
    /// The complete current set (after the first list and every re-list).
    Listed(Vec<Value>),
    /// One change since.
    Changed(EventType, Value),
    /// The server could not be reached; the list-watch retries after a back-off.
    Unavailable(ApiError),
}

/// Which objects a list-watch follows, and how much of them.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub field_selector: Option<String>,
    /// Only `metadata` is needed (the garbage collector's case): cheaper in-process.
    pub metadata_only: bool,
}

impl Scope {
    pub fn fields(selector: impl Into<String>) -> Self {
        Scope { field_selector: Some(selector.into()), metadata_only: false }
    }
}

/// Runs until `sink` returns false (its receiver is gone).
pub async fn list_watch(
    client: Arc<dyn ApiClient>,
    resource: &'static ResourceType,
    scope: Scope,
    mut sink: impl FnMut(Feed) -> bool,
) {
    let mut wait = Duration::from_millis(200);
    let Scope { field_selector, metadata_only } = scope;
    loop {
        let options = ListOptions {
            field_selector: field_selector.clone(),
            metadata_only,
            ..ListOptions::default()
        };
        let list = match client.list(resource, None, &options).await {
            Ok(list) => list,
            Err(error) => {
                let message = error.to_string();
                if !sink(Feed::Unavailable(error)) {
                    return;
                }
                tracing::warn!(resource = resource.plural, error = %message, "listing; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_RETRY);
                continue;
            }
        };
        wait = Duration::from_millis(200);
        if !sink(Feed::Listed(list.items)) {
            return;
        }
        let options = WatchOptions {
            field_selector: field_selector.clone(),
            resource_version: Some(list.resource_version),
            allow_bookmarks: true,
            metadata_only,
            ..WatchOptions::default()
        };
        let mut events = match client.watch(resource, None, &options).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(resource = resource.plural, %error, "watching; re-listing");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        while let Some(event) = events.next().await {
            match event {
                ClientEvent::Object(kind, object) => {
                    if !sink(Feed::Changed(kind, object)) {
                        return;
                    }
                }
                ClientEvent::Bookmark { .. } => {}
                ClientEvent::Error(error) => {
                    tracing::debug!(resource = resource.plural, %error, "watch ended; re-listing");
                    break;
                }
            }
        }
    }
}
