//! Watches as the API serves them: optional initial state, then the hub's live events.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, Stream, StreamExt};

use super::{filter, parse_rv, view_field_selector, ApiCore, ApiError, View, WatchOptions};
use crate::model::{ResourceType, StoredObject};
use crate::watch::{Bookmarks, EventType, WatchItem};

/// How long before a watch's timeout its last bookmark is sent (Kubernetes' watch cache: ~2 s).
const LAST_BOOKMARK_BEFORE_END: Duration = Duration::from_secs(2);

/// One frame of a watch stream.
#[derive(Debug, Clone)]
pub enum WatchFrame {
    Event(EventType, Arc<StoredObject>),
    /// All events up to `resource_version` were sent; `initial_events_end` marks the end of
    /// the initial state for `sendInitialEvents=true`.
    Bookmark {
        resource_version: u64,
        initial_events_end: bool,
    },
    /// The watch ended with this error (sent as an ERROR event).
    Error(ApiError),
}

pub type WatchStream = Pin<Box<dyn Stream<Item = WatchFrame> + Send>>;

impl ApiCore {
    /// Starts a watch. Selector and resourceVersion errors are returned at once; a
    /// resourceVersion too old to resume from yields a stream with a single 410 error frame.
    pub async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<WatchStream, ApiError> {
        if let Some(view) = View::of(resource) {
            let field_selector = view_field_selector(view, &options.field_selector)?;
            let options = &WatchOptions { field_selector, ..options.clone() };
            let frames = Box::pin(self.watch(view.storage, namespace, options)).await?;
            return Ok(frames
                .map(move |frame| match frame {
                    WatchFrame::Event(kind, object) => WatchFrame::Event(kind, view.object(object)),
                    other => other,
                })
                .boxed());
        }
        let filter = filter(resource, namespace, &options.label_selector, &options.field_selector)?;
        // A watch whose time has run out already (a negative timeout) sends nothing at all.
        if options.timeout == Some(std::time::Duration::ZERO) {
            return Ok(stream::empty().boxed());
        }
        let requested = match options.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(rv) => Some(parse_rv(rv)?),
        };
        // The current state comes first as ADDED events when no revision is asked for (the
        // old watch semantics) or when `sendInitialEvents` asks for it (the revision is then
        // only a lower bound for that state, which must be reached); `sendInitialEvents=false`
        // starts from the revision, or from now.
        let send_initial = options.send_initial_events;
        let (from, mut initial_frames) = match (requested, send_initial) {
            (Some(rv), None | Some(false)) => (rv, Vec::new()),
            (None, Some(false)) => {
                // Now: the revision of the resource's committed state (never one handed out
                // to a write of it not yet committed, which would hide that write's event).
                let page = self.store.list(resource, filter.clone(), Some(1), None, None).await?;
                (page.resource_version, Vec::new())
            }
            _ => {
                let page = self.store.list(resource, filter.clone(), None, None, None).await?;
                let frames: Vec<WatchFrame> = page
                    .items
                    .into_iter()
                    .map(|o| WatchFrame::Event(EventType::Added, o))
                    .collect();
                // A revision no write has had yet (another shard's count as reached).
                let current = self.store.current_revision();
                if let Some(requested) = requested.filter(|rv| *rv > current) {
                    return Err(ApiError::TooLargeResourceVersion { requested, current });
                }
                (page.resource_version, frames)
            }
        };
        if send_initial == Some(true) && options.allow_bookmarks {
            initial_frames
                .push(WatchFrame::Bookmark { resource_version: from, initial_events_end: true });
        }
        let bookmarks = match (options.allow_bookmarks, options.timeout) {
            (false, _) => Bookmarks::None,
            (true, None) => Bookmarks::Periodic,
            (true, Some(timeout)) => {
                match timeout.checked_sub(LAST_BOOKMARK_BEFORE_END).filter(|after| !after.is_zero())
                {
                    Some(after) => Bookmarks::PeriodicAndLast { after },
                    None => Bookmarks::Periodic,
                }
            }
        };
        let subscription = match self.hub.subscribe(resource, filter, from, bookmarks).await {
            Ok(s) => s,
            Err(e) => return Ok(stream::iter([WatchFrame::Error(e.into())]).boxed()),
        };
        let live = subscription.map(|item| match item {
            WatchItem::Event(kind, object) => WatchFrame::Event(kind, object),
            WatchItem::Bookmark(rv) => {
                WatchFrame::Bookmark { resource_version: rv, initial_events_end: false }
            }
            WatchItem::Error(e) => WatchFrame::Error(e.into()),
        });
        let frames = stream::iter(initial_frames).chain(live);
        Ok(match options.timeout {
            Some(timeout) => frames.take_until(tokio::time::sleep(timeout)).boxed(),
            None => frames.boxed(),
        })
    }
}
