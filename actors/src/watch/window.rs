//! The hub's window of recent events, per resource type, bounded in total size.

use std::collections::{HashMap, VecDeque};

use super::WatchEvent;
use crate::model::ResourceType;

/// Recent committed events. A watch may resume from any revision at or above the newest event
/// this window has dropped for its resource type (or the revision the window started at).
pub(crate) struct EventWindow {
    capacity: usize,
    len: usize,
    /// The most bytes of objects kept, and how many are: a few large objects written over and
    /// over would otherwise fill the memory long before `capacity` events.
    max_bytes: usize,
    bytes: usize,
    events: HashMap<&'static ResourceType, VecDeque<WatchEvent>>,
    /// Resource types in the order their events arrived: eviction is oldest-first overall.
    arrival: VecDeque<&'static ResourceType>,
    evicted_upto: HashMap<&'static ResourceType, u64>,
    /// Revisions at or below this were never in the window (they predate the process).
    floor: u64,
}

impl EventWindow {
    pub(crate) fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            len: 0,
            max_bytes,
            bytes: 0,
            events: HashMap::new(),
            arrival: VecDeque::new(),
            evicted_upto: HashMap::new(),
            floor: 0,
        }
    }

    pub(crate) fn set_floor(&mut self, floor: u64) {
        self.floor = floor;
    }

    /// The revision the window started at.
    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    pub(crate) fn push(&mut self, event: WatchEvent) {
        let resource = event.object.key.resource;
        self.bytes += event.object.raw.len();
        self.events.entry(resource).or_default().push_back(event);
        self.arrival.push_back(resource);
        self.len += 1;
        while self.len > self.capacity || (self.bytes > self.max_bytes && self.len > 1) {
            let Some(oldest) = self.arrival.pop_front() else { break };
            if let Some(evicted) = self.events.get_mut(oldest).and_then(VecDeque::pop_front) {
                self.bytes -= evicted.object.raw.len();
                self.evicted_upto.insert(oldest, evicted.object.resource_version);
            }
            self.len -= 1;
        }
    }

    /// The oldest revision a watch of `resource` may start from.
    pub(crate) fn oldest(&self, resource: &'static ResourceType) -> u64 {
        self.evicted_upto.get(resource).copied().unwrap_or(0).max(self.floor)
    }

    /// The events of `resource` after `revision`, or `Err(oldest)` when some are gone.
    pub(crate) fn since(
        &self,
        resource: &'static ResourceType,
        revision: u64,
    ) -> Result<impl Iterator<Item = &WatchEvent>, u64> {
        let oldest = self.oldest(resource);
        if revision < oldest {
            return Err(oldest);
        }
        let events = self.events.get(resource);
        let start = events
            .map(|e| e.partition_point(|ev| ev.object.resource_version <= revision))
            .unwrap_or(0);
        Ok(events.into_iter().flat_map(move |e| e.range(start..)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{resources::find, ObjectKey, StoredObject};
    use crate::watch::EventType;
    use std::sync::Arc;

    fn event(plural: &str, rv: u64) -> WatchEvent {
        let resource = find("", "v1", plural).unwrap();
        let key = ObjectKey::new(resource, "ns", "x");
        let object =
            Arc::new(StoredObject::from_value(key, serde_json::json!({"metadata":{}}), rv));
        WatchEvent { kind: EventType::Added, object, previous: None }
    }

    #[test]
    fn large_objects_are_let_go_by_their_size() {
        let pods = find("", "v1", "pods").unwrap();
        let size = event("pods", 1).object.raw.len();
        let mut window = EventWindow::new(100, size * 5 / 2);
        for rv in 1..=4 {
            window.push(event("pods", rv));
        }
        let kept: Vec<u64> =
            window.since(pods, 2).unwrap().map(|e| e.object.resource_version).collect();
        assert_eq!(kept, [3, 4], "two events' worth of bytes");
        assert_eq!(window.since(pods, 1).err(), Some(2));
    }

    #[test]
    fn resumes_and_expires() {
        let pods = find("", "v1", "pods").unwrap();
        let mut window = EventWindow::new(3, usize::MAX);
        window.set_floor(1);
        for (plural, rv) in [("pods", 2), ("services", 3), ("pods", 4), ("pods", 5)] {
            window.push(event(plural, rv));
        }
        // Capacity 3: the pod at rv 2 was evicted.
        let rvs = |from| {
            window
                .since(pods, from)
                .map(|it| it.map(|e| e.object.resource_version).collect::<Vec<_>>())
        };
        assert_eq!(rvs(2), Ok(vec![4, 5]));
        assert_eq!(rvs(4), Ok(vec![5]));
        assert_eq!(rvs(9), Ok(vec![]));
        assert_eq!(rvs(1), Err(2));
        let services = find("", "v1", "services").unwrap();
        assert_eq!(window.since(services, 0).err(), Some(1));
    }
}
