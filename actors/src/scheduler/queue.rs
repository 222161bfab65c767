//! The scheduling queue: an active heap ordered by priority then age, a back-off area for pods
//! whose last attempt failed, and an unschedulable set that waits for the cluster to change.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::node_info::PodInfo;

const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Where a pending pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Active,
    Backoff,
    Unschedulable,
    /// Picked and being bound.
    InFlight,
}

/// A pending pod.
#[derive(Debug, Clone)]
pub struct Queued {
    pub info: Arc<PodInfo>,
    pub place: Place,
    pub attempts: u32,
    /// The order it was first seen in: older pods go first among equal priorities.
    age: u64,
    /// Not retried before this instant.
    backoff_until: Option<Instant>,
    /// When it was last found unschedulable.
    unschedulable_since: Option<Instant>,
    /// The last unschedulable message written for it (written again only when it changes).
    pub last_message: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    priority: i32,
    age: u64,
    uid: String,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority.cmp(&other.priority).then_with(|| other.age.cmp(&self.age))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug, Default)]
pub struct SchedulingQueue {
    pods: HashMap<String, Queued>,
    active: BinaryHeap<Entry>,
    backoff: BTreeMap<(Instant, u64), String>,
    next_age: u64,
}

impl SchedulingQueue {
    pub fn get(&self, uid: &str) -> Option<&Queued> {
        self.pods.get(uid)
    }

    pub fn get_mut(&mut self, uid: &str) -> Option<&mut Queued> {
        self.pods.get_mut(uid)
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// How many are waiting in the active heap.
    pub fn active_len(&self) -> usize {
        self.pods.values().filter(|q| q.place == Place::Active).count()
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// A new pending pod goes to the active heap; a known one is updated, and retried at once
    /// if it was unschedulable (its spec may have changed what fits).
    pub fn add_or_update(&mut self, info: PodInfo) {
        let uid = info.uid.clone();
        match self.pods.get_mut(&uid) {
            Some(queued) => {
                queued.info = Arc::new(info);
                if queued.place == Place::Unschedulable {
                    queued.place = Place::Active;
                    let entry =
                        Entry { priority: queued.info.priority, age: queued.age, uid: uid.clone() };
                    self.active.push(entry);
                }
            }
            None => {
                let age = self.next_age;
                self.next_age += 1;
                let priority = info.priority;
                self.pods.insert(
                    uid.clone(),
                    Queued {
                        info: Arc::new(info),
                        place: Place::Active,
                        attempts: 0,
                        age,
                        backoff_until: None,
                        unschedulable_since: None,
                        last_message: None,
                    },
                );
                self.active.push(Entry { priority, age, uid });
            }
        }
    }

    pub fn remove(&mut self, uid: &str) -> Option<Queued> {
        // Heap and back-off entries of removed pods are skipped when they come up.
        self.pods.remove(uid)
    }

    /// The next pod to schedule (marked in flight).
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        while let Some(entry) = self.active.pop() {
            if let Some(queued) = self.pods.get_mut(&entry.uid) {
                if queued.place == Place::Active && queued.age == entry.age {
                    queued.place = Place::InFlight;
                    queued.attempts += 1;
                    return Some(queued.info.clone());
                }
            }
        }
        None
    }

    /// The attempt failed for a passing reason (a bind error): retry after a back-off that
    /// doubles with each attempt, from 1 s up to 10 s.
    pub fn back_off(&mut self, uid: &str, now: Instant) {
        let Some(queued) = self.pods.get_mut(uid) else { return };
        let exponent = queued.attempts.saturating_sub(1).min(16);
        let delay = (INITIAL_BACKOFF * 2u32.pow(exponent)).min(MAX_BACKOFF);
        let until = now + delay;
        queued.place = Place::Backoff;
        queued.backoff_until = Some(until);
        self.backoff.insert((until, queued.age), uid.to_string());
    }

    /// No node fits: wait for a change in the cluster (and at least the back-off).
    pub fn unschedulable(&mut self, uid: &str, now: Instant) {
        let Some(queued) = self.pods.get_mut(uid) else { return };
        let exponent = queued.attempts.saturating_sub(1).min(16);
        queued.backoff_until = Some(now + (INITIAL_BACKOFF * 2u32.pow(exponent)).min(MAX_BACKOFF));
        queued.place = Place::Unschedulable;
        queued.unschedulable_since = Some(now);
    }

    /// Retries the pods unschedulable for longer than `longest`, whatever changed (a change
    /// the scheduler does not follow may have made them fit), as kube-scheduler does after 5
    /// minutes.
    pub fn flush_unschedulable(&mut self, now: Instant, longest: std::time::Duration) {
        let stale: std::collections::HashSet<String> = self
            .pods
            .iter()
            .filter(|(_, q)| q.place == Place::Unschedulable)
            .filter(|(_, q)| q.unschedulable_since.is_some_and(|t| now.duration_since(t) > longest))
            .map(|(uid, _)| uid.clone())
            .collect();
        if !stale.is_empty() {
            self.move_unschedulable_if(now, |info| stale.contains(&info.uid));
        }
    }

    /// Moves pods whose back-off has passed to the active heap.
    pub fn flush_backoff(&mut self, now: Instant) {
        while let Some(entry) = self.backoff.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let uid = entry.remove();
            if let Some(queued) = self.pods.get_mut(&uid) {
                if queued.place == Place::Backoff {
                    queued.place = Place::Active;
                    self.active.push(Entry {
                        priority: queued.info.priority,
                        age: queued.age,
                        uid,
                    });
                }
            }
        }
    }

    /// The cluster changed in a way that may make unschedulable pods fit: retry them, each
    /// once its back-off has passed.
    pub fn move_unschedulable(&mut self, now: Instant) {
        self.move_unschedulable_if(now, |_| true);
    }

    /// [`Self::move_unschedulable`] for the unschedulable pods `which` picks.
    pub fn move_unschedulable_if(&mut self, now: Instant, which: impl Fn(&PodInfo) -> bool) {
        let unschedulable = |q: &&mut Queued| q.place == Place::Unschedulable && which(&q.info);
        for (uid, queued) in self.pods.iter_mut().filter(|(_, q)| unschedulable(q)) {
            match queued.backoff_until.filter(|t| *t > now) {
                Some(until) => {
                    queued.place = Place::Backoff;
                    self.backoff.insert((until, queued.age), uid.clone());
                }
                None => {
                    queued.place = Place::Active;
                    let entry =
                        Entry { priority: queued.info.priority, age: queued.age, uid: uid.clone() };
                    self.active.push(entry);
                }
            }
        }
    }

    /// When the earliest back-off ends.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.backoff.keys().next().map(|(t, _)| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(uid: &str, priority: i32) -> PodInfo {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c"}], "priority": priority}
        }))
        .unwrap();
        PodInfo::new(&pod)
    }

    #[test]
    fn priority_first_then_age() {
        let mut q = SchedulingQueue::default();
        q.add_or_update(info("old-low", 0));
        q.add_or_update(info("high", 10));
        q.add_or_update(info("new-low", 0));
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|p| p.uid.clone()).collect();
        assert_eq!(order, ["high", "old-low", "new-low"]);
        assert!(q.pop().is_none());
    }

    #[test]
    fn back_off_then_retry_and_unschedulable_waits_for_a_change() {
        let mut q = SchedulingQueue::default();
        q.add_or_update(info("a", 0));
        q.add_or_update(info("b", 0));
        let now = Instant::now();
        q.pop().unwrap();
        q.back_off("a", now);
        q.pop().unwrap();
        q.unschedulable("b", now);
        assert!(q.pop().is_none());
        q.flush_backoff(now + Duration::from_millis(999));
        assert!(q.pop().is_none(), "still backing off");
        q.flush_backoff(now + Duration::from_secs(1));
        assert_eq!(q.pop().unwrap().uid, "a");
        q.flush_backoff(now + Duration::from_secs(60));
        assert!(q.pop().is_none(), "b waits for a change");
        q.move_unschedulable(now + Duration::from_secs(60));
        assert_eq!(q.pop().unwrap().uid, "b");
        assert_eq!(q.get("b").unwrap().attempts, 2);
        q.remove("b");
        assert_eq!(q.len(), 1);
    }
}
