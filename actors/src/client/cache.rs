//! An informer's store: the objects a list-watch reported, by namespace and name, kept as its
//! feed changes them (client-go's indexer by namespace).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use std::sync::Arc;

use super::informer::{Feed, OnDemand, Scope};
use super::{object_name, ApiClient};
use crate::model::{json, ResourceType};
use crate::watch::EventType;

/// A namespace and a name.
pub type Key = (String, String);

/// Replaces `objects` (by namespace and name) with those `listed`: the keys of both, so that
/// those gone while the list-watch was down are seen to too.
pub fn relist(objects: &mut BTreeMap<Key, Value>, listed: Vec<Value>) -> BTreeSet<Key> {
    apply_feed(objects, Feed::Listed(listed), key_of, |object| object)
}

/// Applies one report of a list-watch to `objects`, each object filed under `key` as `read`
/// makes it; returns the keys it may have changed (after a list, those of the old set and
/// the new).
pub fn apply_feed<K: Ord + Clone, T>(
    objects: &mut BTreeMap<K, T>,
    feed: Feed,
    key: impl Fn(&Value) -> K,
    read: impl Fn(Value) -> T,
) -> BTreeSet<K> {
    match feed {
        Feed::Listed(items) => {
            let listed: BTreeMap<K, T> = items.into_iter().map(|o| (key(&o), read(o))).collect();
            let old = std::mem::replace(objects, listed);
            old.into_keys().chain(objects.keys().cloned()).collect()
        }
        Feed::Changed(EventType::Deleted, object) => {
            let key = key(&object);
            objects.remove(&key);
            BTreeSet::from([key])
        }
        Feed::Changed(_, object) => {
            let key = key(&object);
            objects.insert(key.clone(), read(object));
            BTreeSet::from([key])
        }
        Feed::Unavailable(_) => BTreeSet::new(),
    }
}

/// An object's namespace and name.
pub fn key_of(object: &Value) -> Key {
    let namespace = json::at(object, "/metadata/namespace").and_then(Value::as_str);
    (namespace.unwrap_or("").to_string(), object_name(object).to_string())
}

/// The objects of one resource, by namespace and name.
#[derive(Debug, Default)]
pub struct ObjectCache {
    objects: HashMap<String, BTreeMap<String, Value>>,
    /// Whether it holds a whole list (and every change since).
    listed: bool,
}

/// What a feed changed in a cache.
pub enum Applied {
    /// Everything was listed anew.
    Listed,
    /// One object changed: it as it is now (or was, when deleted), and as it was before.
    Changed { object: Value, previous: Option<Value> },
    /// Nothing (the server could not be reached).
    Nothing,
}

impl ObjectCache {
    /// Applies one report of a list-watch.
    pub fn apply(&mut self, feed: Feed) -> Applied {
        match feed {
            Feed::Listed(items) => {
                self.objects.clear();
                for object in items {
                    let (namespace, name) = key_of(&object);
                    self.objects.entry(namespace).or_default().insert(name, object);
                }
                self.listed = true;
                Applied::Listed
            }
            Feed::Changed(kind, object) => {
                let (namespace, name) = key_of(&object);
                let previous = if kind == EventType::Deleted {
                    let in_namespace = self.objects.get_mut(&namespace);
                    let previous = in_namespace.and_then(|objects| objects.remove(&name));
                    if self.objects.get(&namespace).is_some_and(BTreeMap::is_empty) {
                        self.objects.remove(&namespace);
                    }
                    previous
                } else {
                    self.objects.entry(namespace).or_default().insert(name, object.clone())
                };
                Applied::Changed { object, previous }
            }
            Feed::Unavailable(_) => Applied::Nothing,
        }
    }

    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// Forgets everything (the list-watch was let go).
    pub fn clear(&mut self) {
        self.objects.clear();
        self.listed = false;
    }

    /// The object at `key`.
    pub fn get(&self, (namespace, name): &Key) -> Option<&Value> {
        self.objects.get(namespace)?.get(name)
    }

    /// Every object, by namespace and name.
    pub fn all(&self) -> impl Iterator<Item = &Value> + '_ {
        self.objects.values().flat_map(BTreeMap::values)
    }

    /// The objects of `namespace`, by name.
    pub fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.get(namespace).into_iter().flat_map(BTreeMap::values)
    }
}

/// A cache filled by a list-watch that runs only while its component needs it: let go, the
/// cache is emptied, and what a run let go had still sent is ignored.
#[derive(Debug, Default)]
pub struct OnDemandCache {
    feed: OnDemand,
    objects: ObjectCache,
}

impl OnDemandCache {
    /// Follows `resource` for the actor of `ctx`, unless already following it: its reports
    /// go to the actor wrapped by `message` with the run they are from, for
    /// [`OnDemandCache::apply`].
    pub fn follow<A, M>(
        &mut self,
        ctx: &actix::Context<A>,
        client: Arc<dyn ApiClient>,
        resource: &'static ResourceType,
        message: fn(u64, Feed) -> M,
    ) where
        A: actix::Actor<Context = actix::Context<A>> + actix::Handler<M>,
        M: actix::Message<Result = ()> + Send + 'static,
    {
        use actix::AsyncContext;
        let addr = ctx.address();
        self.feed.start(client, resource, Scope::default(), move |run, feed| {
            addr.do_send(message(run, feed));
            addr.connected()
        });
    }

    /// Stops following, and forgets everything.
    pub fn let_go(&mut self) {
        self.feed.stop();
        self.objects.clear();
    }

    /// Applies a report of run `run` (nothing, for a run let go).
    pub fn apply(&mut self, run: u64, feed: Feed) -> Applied {
        if !self.feed.is_current(run) {
            return Applied::Nothing;
        }
        self.objects.apply(feed)
    }

    pub fn objects(&self) -> &ObjectCache {
        &self.objects
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(namespace: &str, name: &str, version: u32) -> Value {
        json!({"metadata": {"namespace": namespace, "name": name, "resourceVersion": version}})
    }

    #[test]
    fn follows_a_feed_by_namespace_and_name() {
        let mut cache = ObjectCache::default();
        assert!(!cache.is_listed());
        cache.apply(Feed::Listed(vec![pod("a", "x", 1), pod("b", "y", 1)]));
        assert!(cache.is_listed());
        let Applied::Changed { previous, .. } =
            cache.apply(Feed::Changed(EventType::Modified, pod("a", "x", 2)))
        else {
            panic!("a change")
        };
        assert_eq!(previous, Some(pod("a", "x", 1)));
        cache.apply(Feed::Changed(EventType::Added, pod("a", "w", 3)));
        let names: Vec<&str> = cache.in_namespace("a").map(object_name).collect();
        assert_eq!(names, ["w", "x"]);
        let Applied::Changed { previous, .. } =
            cache.apply(Feed::Changed(EventType::Deleted, pod("b", "y", 4)))
        else {
            panic!("a change")
        };
        assert_eq!(previous, Some(pod("b", "y", 1)));
        assert_eq!(cache.in_namespace("b").count(), 0);
        assert!(!cache.objects.contains_key("b"), "an emptied namespace leaves no entry");
        cache.clear();
        assert!(!cache.is_listed() && cache.in_namespace("a").count() == 0);
    }
}
