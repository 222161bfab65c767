//! The options of list, watch and delete requests, as the query string and body carry them.

/// Options of a list (`GET` on a collection).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    /// Unset: the most recent state; `"0"`: any state; otherwise see `resource_version_match`.
    pub resource_version: Option<String>,
    /// `Exact` (the state at exactly `resource_version`) or `NotOlderThan` (the default).
    pub resource_version_match: Option<String>,
    /// How much of each object is needed: a hint, a client may still return whole objects.
    pub view: ObjectView,
}

/// Options of a watch.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Unset or `"0"`: start with the current state; otherwise changes after this revision.
    pub resource_version: Option<String>,
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`: `Some(true)` sends the current state first, then (with bookmarks)
    /// one marking its end; `Some(false)` sends none of it, whatever the revision; unset, the
    /// current state comes first only when no revision (or `"0"`) is asked for.
    pub send_initial_events: Option<bool>,
    /// As for lists: how much of each object is needed.
    pub view: ObjectView,
    /// How long the watch lasts (`timeoutSeconds`): its stream then ends, and a watcher with
    /// bookmarks gets one shortly before, as Kubernetes sends one, so that it resumes from a
    /// recent revision. Unset, it lasts until its consumer drops it.
    pub timeout: Option<std::time::Duration>,
}

/// How much of each object an in-process list or watch hands its consumer (over HTTP, objects
/// are always whole).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ObjectView {
    #[default]
    Whole,
    /// `apiVersion`, `kind` and `metadata` without `managedFields`, as a metadata informer
    /// gets them.
    Metadata,
    /// The metadata a graph of owners needs: `uid`, `namespace`, `name` and
    /// `resourceVersion`, and `ownerReferences`, `finalizers` and `deletionTimestamp` when they
    /// are set. An object
    /// with none of those three is answered without reading its JSON.
    Ownership,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub dry_run: bool,
    /// The older form of `propagation_policy`, as given (its effect is in the policy): a
    /// delete that asks not to orphan and does not remove the object at once is answered
    /// `202 Accepted`, as Kubernetes answers it.
    pub orphan_dependents: Option<bool>,
}

/// Options of a create, update, patch or apply.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Validate and admit, but persist nothing (`dryRun=All`).
    pub dry_run: bool,
    /// Who writes, for `managedFields`; unset: the core's own name for its callers.
    pub field_manager: Option<String>,
    /// An apply takes the fields it conflicts on from their owners.
    pub force: bool,
    /// `fieldValidation=Strict`: a patch whose result holds a field its kind does not declare
    /// is refused (422 on `patch`), as Kubernetes refuses it; otherwise the field is dropped.
    /// (Bodies of creates, updates and applies are checked at the HTTP edge.)
    pub strict_fields: bool,
    /// What a strict decoding of a patch's own body found (repeated fields; a JSON patch
    /// operation's unknown or repeated members), in Kubernetes' words: with `strict_fields`,
    /// they refuse the patch ahead of the patched object's unknown fields.
    pub patch_findings: Vec<String>,
    /// Why the writer may not create the object, if so (it may patch or update it:
    /// Kubernetes authorizes an apply, or an update, that creates its object as a create):
    /// such a write is refused with this reason (403).
    pub create_denied: Option<String>,
}

impl WriteOptions {
    pub fn dry_run() -> Self {
        WriteOptions { dry_run: true, ..Default::default() }
    }
}
