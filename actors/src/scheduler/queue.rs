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
    /// What of the pod an update may change to make it fit (see [`fingerprint`]).
    fingerprint: u64,
}

/// A digest of what of a pod may decide where it fits: all but its status and the metadata
/// every write changes (`resourceVersion`, `generation`, `managedFields`), as kube-scheduler's
/// `isPodUpdated` compares a pod with its last version. The scheduler's own status writes
/// (why it fits nowhere, the node a preemption made room on) leave it as it is.
pub fn fingerprint(pod: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    if let Some(metadata) = pod.get("metadata").and_then(serde_json::Value::as_object) {
        for (key, value) in metadata {
            if !matches!(key.as_str(), "resourceVersion" | "generation" | "managedFields") {
                key.hash(&mut hasher);
                value.to_string().hash(&mut hasher);
            }
        }
    }
    pod.get("spec").map(ToString::to_string).hash(&mut hasher);
    hasher.finish()
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

    /// A new pending pod goes to the active heap; a known one is updated, and, if it was
    /// unschedulable and the update changed more than its status (see [`fingerprint`]), retried
    /// once its back-off has passed, as kube-scheduler retries an updated pod.
    pub fn add_or_update(&mut self, info: PodInfo, fingerprint: u64, now: Instant) {
        let uid = info.uid.clone();
        match self.pods.get_mut(&uid) {
            Some(queued) => {
                queued.info = Arc::new(info);
                let updated =
                    std::mem::replace(&mut queued.fingerprint, fingerprint) != fingerprint;
                if queued.place == Place::Unschedulable && updated {
                    retry(queued, uid, now, &mut self.active, &mut self.backoff);
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
                        fingerprint,
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
        // Queued again from now, as kube-scheduler stamps a pod it puts back: retried, it goes
        // behind the pods of its priority that were waiting before it failed.
        queued.age = self.next_age;
        self.next_age += 1;
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
            retry(queued, uid.clone(), now, &mut self.active, &mut self.backoff);
        }
    }

    /// When the earliest back-off ends.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.backoff.keys().next().map(|(t, _)| *t)
    }
}

/// Moves an unschedulable pod to be tried again: to the back-off area while its back-off
/// lasts, else to the active heap.
fn retry(
    queued: &mut Queued,
    uid: String,
    now: Instant,
    active: &mut BinaryHeap<Entry>,
    backoff: &mut BTreeMap<(Instant, u64), String>,
) {
    match queued.backoff_until.filter(|until| *until > now) {
        Some(until) => {
            queued.place = Place::Backoff;
            backoff.insert((until, queued.age), uid);
        }
        None => {
            queued.place = Place::Active;
            active.push(Entry { priority: queued.info.priority, age: queued.age, uid });
        }
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
        let now = Instant::now();
        q.add_or_update(info("old-low", 0), 0, now);
        q.add_or_update(info("high", 10), 0, now);
        q.add_or_update(info("new-low", 0), 0, now);
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|p| p.uid.clone()).collect();
        assert_eq!(order, ["high", "old-low", "new-low"]);
        assert!(q.pop().is_none());
    }

    #[test]
    fn a_pod_put_back_goes_behind_those_of_its_priority_waiting_before() {
        let mut q = SchedulingQueue::default();
        let now = Instant::now();
        q.add_or_update(info("first", 0), 0, now);
        assert_eq!(q.pop().unwrap().uid, "first");
        q.add_or_update(info("second", 0), 0, now);
        q.unschedulable("first", now);
        q.move_unschedulable(now + Duration::from_secs(60));
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|p| p.uid.clone()).collect();
        assert_eq!(order, ["second", "first"]);
    }

    #[test]
    fn back_off_then_retry_and_unschedulable_waits_for_a_change() {
        let mut q = SchedulingQueue::default();
        let now = Instant::now();
        q.add_or_update(info("a", 0), 0, now);
        q.add_or_update(info("b", 0), 0, now);
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

    /// An unschedulable pod whose update changes only its status (the scheduler's own write
    /// of why it waits) stays waiting; one whose spec changed is retried once its back-off
    /// has passed.
    #[test]
    fn an_unschedulable_pod_is_retried_for_an_update_of_more_than_its_status() {
        let mut q = SchedulingQueue::default();
        let now = Instant::now();
        let pod = serde_json::json!({"metadata": {"name": "p", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "c"}]}});
        q.add_or_update(info("p", 0), fingerprint(&pod), now);
        q.pop().unwrap();
        q.unschedulable("p", now);
        let mut status_written = pod.clone();
        status_written["metadata"]["resourceVersion"] = serde_json::json!("2");
        status_written["status"] = serde_json::json!({"nominatedNodeName": "n"});
        q.add_or_update(info("p", 0), fingerprint(&status_written), now);
        q.flush_backoff(now + Duration::from_secs(5));
        assert!(q.pop().is_none(), "its own status write does not retry it");
        let mut relabelled = status_written.clone();
        relabelled["metadata"]["labels"] = serde_json::json!({"tier": "x"});
        q.add_or_update(info("p", 0), fingerprint(&relabelled), now);
        assert!(q.pop().is_none(), "not before its back-off");
        q.flush_backoff(now + Duration::from_secs(1));
        assert_eq!(q.pop().unwrap().uid, "p");
    }
}
