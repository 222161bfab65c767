//! The API core: validation, defaulting, server-owned metadata and the Kubernetes semantics of
//! each verb, in front of the store and the watch hub. Every client (the HTTP edge, in-process
//! components) goes through it.

mod apply;
mod claim_resize;
mod conversion;
mod default_tolerations;
mod defaults;
mod error;
mod eviction;
mod field_set;
mod limit_ranger;
mod managed_fields;
mod options;
mod patch;
mod pod_security;
mod priority;
mod resource_quota;
mod runtime_class;
mod service_account;
mod service_ips;
pub mod storage_protection;
mod subresources;
pub mod token_request;
mod watch;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use base64::Engine as _;
use chrono::{SecondsFormat, Utc};
use memchr::memmem;
use rand::Rng;
use serde_json::{json, Map, Value};

pub use apply::typed_patch_error;
pub use error::{aggregate, ApiError};
pub use managed_fields::FieldConflict;
pub use options::{DeleteOptions, ListOptions, ObjectView, WatchOptions, WriteOptions};
/// A patch applied as the API server applies it (for callers that must judge a patch's effect
/// exactly as it will be stored).
pub(crate) use patch::apply as apply_patch;
pub use patch::PatchType;
pub use resource_quota::{QuotaGuard, QuotaLocks};
pub use service_account::{API_ACCESS_MOUNT_PATH, DEFAULT_SERVICE_ACCOUNT};
pub use service_ips::ServiceRanges;
pub use subresources::set_condition;
pub use watch::{WatchFrame, WatchStream};

use crate::model::priority::{system_class, SYSTEM_CLASSES};
use crate::model::resources::SCHEDULING_GROUP;
use crate::model::{
    json, now, owners, quota, resources, FieldError, FieldSelector, LabelSelector, SelectorError,
};
use crate::model::{
    validation, ObjectFilter, ObjectKey, PreparedObject, ResourceType, StoredObject,
};
use crate::store::{ContinuePoint, NamespaceState, Preconditions, Store, StoreError};
use crate::watch::HubHandle;
use conversion::View;
use managed_fields::{ManagedFields, Operation, Writer};

pub use crate::model::finalizers::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};

/// The longest grace period a pod's deletion, or its containers' stop, is given, whatever it
/// asks (a deadline further out could not be named): a hundred years.
pub const MAX_GRACE_SECONDS: i64 = 100 * 365 * 24 * 60 * 60;

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Whether `name` of `resource` is one of the system PriorityClasses, which may not be deleted.
fn is_system_priority_class(resource: &ResourceType, name: &str) -> bool {
    resource.kind == "PriorityClass" && SYSTEM_CLASSES.iter().any(|(system, ..)| *system == name)
}

/// System namespaces that may not be deleted (as in Kubernetes, kube-node-lease may).
const PROTECTED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// How many times an unconditional update retries when it races another writer. Each retry
/// first waits for the shard to commit what it had accepted (`Store::settle`), and each such
/// round lets one of the racing writers through; a writer is not served in turn, though, so
/// under steady contention one may lose many rounds (with 16 writers on one object, 64 rounds
/// were lost about once in 300 writes). Kubernetes' storage retries without limit; this bound
/// is only a guard against a writer never getting through.
const UPDATE_RETRIES: usize = 1_000;

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ObjectList {
    pub resource_version: u64,
    pub items: Vec<Arc<StoredObject>>,
    /// Opaque token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many objects the pages after this one hold, when the list has no selector.
    pub remaining_item_count: Option<usize>,
}

/// The API core handle: cheap to clone, safe to share between threads.
#[derive(Clone)]
pub struct ApiCore {
    pub(crate) store: Store,
    hub: HubHandle,
    services: Arc<service_ips::ServiceAllocator>,
    /// Serializes the quota charges of each namespace with quotas.
    quota_locks: QuotaLocks,
    /// The field manager of writes that name none (in-process components).
    manager: Arc<str>,
    /// Checks a patched object as its kind's Go type decodes it, dropping undeclared fields.
    schema_check: Option<SchemaCheck>,
    /// Signs the tokens TokenRequests issue (the HTTP edge owns the key).
    token_signer: Option<Arc<dyn token_request::GrantSigner>>,
    /// Pods get an API token volume (the secure port, where tokens are good, is served).
    mount_api_access: bool,
}

/// Removes from an object (of the kind in the group it is given) the fields its schema does
/// not declare, answering their paths, and refuses a value of a type the schema does not take,
/// with the decoder's message (the HTTP edge owns the schemas and supplies it).
pub type SchemaCheck =
    Arc<dyn Fn(&str, &str, &mut Value) -> Result<Vec<String>, String> + Send + Sync>;

/// Kubernetes' strict decoding message for a field its kind does not declare, at `path`
/// (`.spec.bogus` or `spec.bogus`).
pub fn unknown_field_message(path: &str) -> String {
    format!("unknown field \"{}\"", path.trim_start_matches('.'))
}

/// How a write records field ownership.
enum Ownership<'a> {
    /// An update by this field manager: it owns what it changed.
    Update(&'a str),
    /// An update by this field manager through the `scale` subresource.
    Scaled(&'a str),
    /// A server-side apply, whose managed fields are already worked out.
    Applied(ManagedFields),
}

fn namespaces() -> &'static ResourceType {
    resources::core("namespaces")
}

impl ApiCore {
    pub fn new(store: Store, hub: HubHandle) -> Self {
        let services = Arc::new(service_ips::ServiceAllocator::new(ServiceRanges::default()));
        let quota_locks = QuotaLocks::default();
        Self {
            store,
            hub,
            services,
            quota_locks,
            manager: Arc::from("kplane"),
            schema_check: None,
            token_signer: None,
            mount_api_access: false,
        }
    }

    /// Patched objects lose the fields their schema does not declare, and a patch that leaves a
    /// value of the wrong type is refused (422), as in Kubernetes (bodies of creates and
    /// updates are checked at the edge, which also warns about unknown fields).
    pub fn with_schema_check(mut self, check: SchemaCheck) -> Self {
        self.schema_check = Some(check);
        self
    }

    /// Runs the schema check on an object an apply produced: unknown fields and what Go's
    /// `omitempty` leaves out go, and a value of the wrong type is refused (422 on `patch`), as
    /// is an unknown field when `strict` (`fieldValidation=Strict`).
    fn check_schema(
        &self,
        resource: &'static ResourceType,
        name: &str,
        object: &mut Value,
        strict: bool,
    ) -> Result<Vec<String>, ApiError> {
        self.check_schema_as(resource.group, resource.kind, object, strict).map_err(|decoding| {
            ApiError::invalid(resource, name, vec![FieldError::invalid_patch(decoding)])
        })
    }

    /// The schema check of an object of `kind` in `group` (a resource's or a subresource's):
    /// the paths of the fields the schema does not declare, dropped; when `strict`, such a
    /// field is refused with Kubernetes' strict decoding error instead.
    fn check_schema_as(
        &self,
        group: &str,
        kind: &str,
        object: &mut Value,
        strict: bool,
    ) -> Result<Vec<String>, String> {
        let Some(check) = &self.schema_check else { return Ok(Vec::new()) };
        let unknown = check(group, kind, object)?;
        if strict && !unknown.is_empty() {
            let fields: Vec<String> =
                unknown.iter().map(|field| unknown_field_message(field)).collect();
            return Err(format!("strict decoding error: {}", fields.join(", ")));
        }
        Ok(unknown)
    }

    /// The locks that serialize each namespace's quota charges, for the quota controller to
    /// hold while it recounts.
    pub fn quota_locks(&self) -> QuotaLocks {
        self.quota_locks.clone()
    }

    /// The same core, writing as `manager` when a write names no field manager.
    pub fn with_field_manager(mut self, manager: &str) -> Self {
        self.manager = Arc::from(manager);
        self
    }

    fn manager<'a>(&'a self, options: &'a WriteOptions) -> &'a str {
        options.field_manager.as_deref().unwrap_or(&self.manager)
    }

    /// Services draw their cluster IPs and node ports from `ranges`.
    pub fn with_service_ranges(mut self, ranges: ServiceRanges) -> Self {
        self.services = Arc::new(service_ips::ServiceAllocator::new(ranges));
        self
    }

    /// The health of each store shard, in order (see [`Store::check_shards`]).
    pub async fn check_store_shards(
        &self,
        timeout: std::time::Duration,
    ) -> Vec<Result<(), String>> {
        self.store.check_shards(timeout).await
    }

    /// The metrics of the store underneath (commits and their batching), to serve.
    pub fn store_collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        self.store.collectors()
    }

    /// Whether `resource` is core/v1 Services (whose writes hold cluster IPs and node ports).
    pub fn is_service(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "services"
    }

    fn is_pod(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "pods"
    }

    /// Whether `resource` is core/v1 Namespaces.
    pub fn is_namespace(resource: &ResourceType) -> bool {
        resource.group.is_empty() && resource.plural == "namespaces"
    }

    /// Creates the namespaces every cluster has, their `default` ServiceAccounts and the system
    /// PriorityClasses, if they are missing, and takes note of the cluster IPs and node ports the stored services hold.
    /// (The service account controller keeps every namespace's account afterwards; writing
    /// these here spares the first pods after a start waiting for it.)
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        let services = resources::core("services");
        for service in self.list(services, None, &ListOptions::default()).await?.items {
            self.services.restore(&service.to_value());
        }
        let accounts = resources::core("serviceaccounts");
        for ns in SYSTEM_NAMESPACES {
            self.create_if_missing(namespaces(), "", json!({"metadata": {"name": ns}})).await?;
            let account = json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}});
            self.create_if_missing(accounts, ns, account).await?;
        }
        let classes = resources::find(SCHEDULING_GROUP, "v1", "priorityclasses").expect("served");
        for (name, value, description) in SYSTEM_CLASSES {
            self.create_if_missing(classes, "", system_class(name, value, description)).await?;
        }
        Ok(())
    }

    async fn create_if_missing(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<(), ApiError> {
        match self.create(resource, namespace, object, &WriteOptions::default()).await {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The last revision handed out by the store.
    pub fn current_revision(&self) -> u64 {
        self.store.current_revision()
    }

    pub async fn get(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if let Some(view) = View::of(resource) {
            let stored = Box::pin(self.get(view.storage, namespace, name)).await;
            return Ok(view.object(stored.map_err(|e| view.own_error(e))?));
        }
        let key = ObjectKey::new(resource, namespace, name);
        self.store.get(&key).await?.ok_or_else(|| ApiError::not_found(resource, name))
    }

    pub async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, ApiError> {
        if let Some(view) = View::of(resource) {
            let field_selector = view_field_selector(view, &options.field_selector)?;
            let options = &ListOptions { field_selector, ..options.clone() };
            let mut list = Box::pin(self.list(view.storage, namespace, options)).await?;
            list.items = list.items.into_iter().map(|o| view.object(o)).collect();
            return Ok(list);
        }
        let filter = filter(resource, namespace, &options.label_selector, &options.field_selector)?;
        let causes = list_option_problems(options);
        if !causes.is_empty() {
            return Err(ApiError::invalid_options("ListOptions", causes));
        }
        // The token is read before it is checked against the options, as Kubernetes' storage
        // reads it.
        let continue_from = options.continue_token.as_deref().map(decode_continue).transpose()?;
        if let Some(point) = continue_from.as_ref().filter(|p| p.revision != ContinuePoint::LATEST)
        {
            // A token of a revision not handed out yet (made up): as for a resourceVersion.
            self.require_revision(Some(&point.revision.to_string()))?;
        }
        let exact = self.list_revision(options)?;
        let from = continue_from.clone();
        // A list at any revision ("0") is whole, as Kubernetes serves it from its watch cache,
        // which does not page (1.32): the limit counts only from the latest state. Events
        // have no watch cache in Kubernetes (their storage is read): theirs pages.
        let cached = !(resource.group.is_empty() && resource.plural == "events");
        let any_revision =
            cached && options.resource_version.as_deref() == Some("0") && from.is_none();
        let limit = options.limit.filter(|_| !any_revision);
        let page = match self.store.list(resource, filter, limit, continue_from, exact).await {
            Err(StoreError::Expired(_)) => {
                let Some(point) = from else {
                    let message = "The resourceVersion for the provided list is too old.";
                    return Err(ApiError::Expired(message.into()));
                };
                // As Kubernetes: the snapshot is gone, and the answer gives a token that
                // goes on from the same place in the latest state.
                let latest = ContinuePoint { revision: ContinuePoint::LATEST, ..point };
                let continue_token = encode_continue(&latest);
                return Err(ApiError::InconsistentContinue { continue_token });
            }
            page => page?,
        };
        let continue_token = page.next.as_ref().map(encode_continue);
        Ok(ObjectList {
            resource_version: page.resource_version,
            items: page.items,
            continue_token,
            remaining_item_count: page.next.and_then(|next| next.remaining),
        })
    }

    /// Checks a read's `resourceVersion` against the Kubernetes API concepts: unset or `"0"`
    /// reads the latest state; a number the store has not reached yet is a 504 the client
    /// retries. Returns the parsed revision (`None` for unset and `"0"`).
    pub fn require_revision(
        &self,
        resource_version: Option<&str>,
    ) -> Result<Option<u64>, ApiError> {
        match resource_version {
            None | Some("0") => Ok(None),
            Some(rv) => {
                let requested = parse_rv(rv)?;
                let current = self.current_revision();
                if requested > current {
                    return Err(ApiError::TooLargeResourceVersion { requested, current });
                }
                Ok(Some(requested))
            }
        }
    }

    /// The revision a list must be served at exactly (`resourceVersionMatch=Exact`, or a
    /// `resourceVersion` with a `limit`), after checking the combination of options.
    fn list_revision(&self, options: &ListOptions) -> Result<Option<u64>, ApiError> {
        let rv = options.resource_version.as_deref();
        if rv.is_some_and(|v| v != "0") && options.continue_token.is_some() {
            return Err(ApiError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        let revision = self.require_revision(rv)?;
        // Exact, or (as etcd serves a paginated list with a resourceVersion and no match, which
        // kube-apiserver hands it) a resourceVersion with a limit.
        let exact = match options.resource_version_match.as_deref() {
            Some(matching) => matching == "Exact",
            None => options.limit.is_some_and(|limit| limit > 0),
        };
        Ok(revision.filter(|_| exact))
    }

    pub async fn create(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        // As Kubernetes' storage refuses it (there with a 500): an object read back and sent
        // again as a create is a mistake worth naming. "0", which names no version, is let
        // through as there.
        if json::at(&body, "/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty() && rv != "0")
        {
            return Err(ApiError::BadRequest(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        if let Some(view) = View::of(resource) {
            let body = view.stored_form(body, true)?;
            let created = Box::pin(self.create(view.storage, namespace, body, options)).await;
            let created = created.map_err(|e| view.own_error(e))?;
            return Ok(view.object(created));
        }
        let ownership = Ownership::Update(self.manager(options));
        self.create_owned(resource, namespace, body, options.dry_run, ownership).await
    }

    async fn create_owned(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        body: Value,
        dry_run: bool,
        ownership: Ownership<'_>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut object = typed_object(resource, body)?;
        let meta = metadata(&mut object)?;
        set_namespace(resource, namespace, meta)?;
        owners::dedup(meta);
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let generate = meta.get("generateName").and_then(Value::as_str).unwrap_or("").to_string();
        // What the mutating admission's refusals name, as in Kubernetes, whose mutating
        // plugins run before a name is generated: the prefix (`pods "web-" is forbidden`).
        // The validating ones (LimitRanger's limits, ResourceQuota, Priority's class check)
        // run after and name the generated name.
        let admitted_as = if name.is_empty() { generate.clone() } else { name.clone() };
        if name.is_empty() && !generate.is_empty() {
            meta.insert("name".into(), json!(generated_name(&generate)));
        }
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("creationTimestamp".into(), json!(now()));
        if resource.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        }
        for server_owned in
            ["resourceVersion", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"]
        {
            meta.remove(server_owned);
        }
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        defaults::prepare_for_create(resource.kind, &mut object);
        defaults::apply(resource.kind, &mut object);
        // The creator's managedFields entry, when written as text rather than into `object`.
        let managed_fields = match ownership {
            Ownership::Update(manager) | Ownership::Scaled(manager) => {
                let fields = ManagedFields::requested(&Value::Null, &object)?;
                let writer = writer(resource, manager, Operation::Update, Part::Main);
                fields.record_create(&mut object, &writer, has_status(resource))
            }
            Ownership::Applied(fields) => {
                fields.write_to(&mut object);
                None
            }
        };
        // Admission, after the creator's field ownership is worked out, as in Kubernetes:
        // what it sets is not the creator's. The namespace first, then the plugins in
        // Kubernetes' order.
        if resource.namespaced {
            self.check_namespace_accepts(resource, namespace, &admitted_as)?;
        }
        let limit_ranges = self.limit_ranges(resource, namespace);
        if resource.kind == "Node" && resource.group.is_empty() {
            crate::model::taints::add_not_ready_taint(&mut object);
        }
        if Self::is_pod(resource) {
            if limit_ranger::default_pod(&limit_ranges, &mut object) {
                defaults::recompute_qos_class(&mut object);
            }
            service_account::admit(&self.store, namespace, &mut object, self.mount_api_access)
                .await
                .map_err(|why| ApiError::forbidden(resource, &admitted_as, why, Vec::new()))?;
            priority::admit_pod(&self.priority_classes_for(&object), &mut object)
                .map_err(|why| ApiError::forbidden(resource, &admitted_as, why, Vec::new()))?;
            if let Some(why) = runtime_class::class_refusal(&object) {
                return Err(ApiError::forbidden(resource, &admitted_as, why, Vec::new()));
            }
        }
        let mut errors = validation::validate_generate_name(resource, &object);
        errors.extend(validation::validate_object(resource, &object));
        if Self::is_pod(resource) {
            errors.extend(validation::validate_pod_create(&object));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(resource, &name, errors));
        }
        defaults::canonicalize(resource.kind, &mut object);
        self.admit_priority_class(resource, &name, &object)?;
        if Self::is_pod(resource) {
            // A mutating plugin run after validation, which what it adds would pass.
            default_tolerations::admit(&mut object);
        }
        if resource.group.is_empty() {
            storage_protection::admit(resource.kind, &mut object);
        }
        // The validating plugins in Kubernetes' order: LimitRanger before PodSecurity.
        self.check_limit_ranges(resource, &name, &limit_ranges, &object)?;
        if Self::is_pod(resource) {
            self.enforce_pod_security(resource, namespace, &name, &object, None)?;
            if let Some(why) = runtime_class::overhead_refusal(&object) {
                return Err(ApiError::forbidden(resource, &name, why, Vec::new()));
            }
        }
        if Self::is_namespace(resource) {
            check_pod_security_labels(&name, None, &object)?;
        }
        // The last admission: charged to the namespace's quotas before it is stored, their
        // lock held until it is.
        let _charged =
            self.charge_quotas(resource, namespace, &name, &object, None, dry_run).await?;
        let key = ObjectKey::new(resource, namespace, &name);
        let allocation = if Self::is_service(resource) {
            Some(self.services.allocate(&mut object, &name, dry_run)?)
        } else {
            None
        };
        let release = || allocation.iter().for_each(|a| self.services.release(a));
        let prepared = PreparedObject::with_json_field(key.clone(), object, managed_fields);
        if dry_run {
            release();
            if self.store.get(&prepared.key).await?.is_some() {
                return Err(self.name_taken(key).await);
            }
            return Ok(Arc::new(not_stored(prepared)));
        }
        let created = self.store.create_prepared(prepared).await;
        if created.is_err() {
            release();
        }
        match created {
            Err(StoreError::AlreadyExists(key)) => Err(self.name_taken(key).await),
            other => Ok(other?),
        }
    }

    /// The PriorityClasses a new pod's priority comes from: the one it names, or else those
    /// marked the global default (read from their stored JSON only then: most pods name no
    /// class, and most clusters have no default).
    fn priority_classes_for(&self, pod: &Value) -> Vec<Value> {
        static GLOBAL_DEFAULT: LazyLock<memmem::Finder<'static>> =
            LazyLock::new(|| memmem::Finder::new(br#""globalDefault":true"#));
        let named = json::at(pod, "/spec/priorityClassName").and_then(Value::as_str);
        let wanted = |class: &StoredObject| match named.filter(|n| !n.is_empty()) {
            Some(name) => class.key.name == name,
            None => GLOBAL_DEFAULT.find(&class.raw).is_some(),
        };
        let classes = self.store.priority_classes();
        classes.iter().filter(|class| wanted(class)).map(|class| class.to_value()).collect()
    }

    /// The Priority plugin's check of a PriorityClass written: one global default at most.
    fn admit_priority_class(
        &self,
        resource: &'static ResourceType,
        name: &str,
        class: &Value,
    ) -> Result<(), ApiError> {
        if resource.kind != "PriorityClass" || class["globalDefault"] != true {
            return Ok(());
        }
        let classes: Vec<Value> =
            self.store.priority_classes().iter().map(|class| class.to_value()).collect();
        priority::admit_class(&classes, class)
            .map_err(|why| ApiError::forbidden(resource, name, why, Vec::new()))
    }

    /// The PodSecurity admission's check of a pod written to `namespace`: refused (403) when
    /// it breaks the standard the namespace enforces.
    /// An update (`old`: the stored pod) is checked only when it is significant.
    fn enforce_pod_security(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        pod: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(labels) = self.store.pod_security_labels(namespace) else { return Ok(()) };
        if old.is_some_and(|old| !pod_security::significant_update(old, pod)) {
            return Ok(());
        }
        let (policy, _) = pod_security::Policy::of(label_pairs(&labels));
        let violations = pod_security::violations(pod, policy.enforce.level);
        if violations.is_empty() {
            return Ok(());
        }
        let message = pod_security::violation_message(&policy.enforce, &violations);
        Err(ApiError::forbidden(resource, name, message, Vec::new()))
    }

    /// The PodSecurity admission's warning about a pod, replication controller or pod
    /// template just created (`would violate PodSecurity ...`): what it (a workload's pod
    /// template) breaks of its namespace's `warn` standard.
    pub fn pod_security_warnings(
        &self,
        resource: &ResourceType,
        object: &StoredObject,
    ) -> Vec<String> {
        let template = match (resource.group, resource.kind) {
            ("", "Pod") => "",
            ("", "ReplicationController") => "/spec/template",
            ("", "PodTemplate") => "/template",
            _ => return Vec::new(),
        };
        let namespace = &object.key.namespace;
        let Some(labels) = self.store.pod_security_labels(namespace) else { return Vec::new() };
        // Read back only now: most namespaces name no standard.
        let object = object.to_value();
        let Some(pod) = json::at(&object, template).filter(|t| t.is_object()) else {
            return Vec::new();
        };
        // (The warn standard follows a stricter enforced one: a pod refused by it never gets
        // here, a workload, which is never refused, is warned about it.)
        let (policy, _) = pod_security::Policy::of(label_pairs(&labels));
        let violations = pod_security::violations(pod, policy.warn.level);
        if violations.is_empty() {
            return Vec::new();
        }
        vec![pod_security::warning(&policy.warn, &violations)]
    }

    /// The pod a write of `resource` is about to replace, when the PodSecurity admission may
    /// warn about the write (a pod in a namespace naming a standard): the warning comes only
    /// for a significant change of it (see [`Self::pod_security_update_warnings`]).
    pub async fn pod_before_write(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        if !Self::is_pod(resource) || self.store.pod_security_labels(namespace).is_none() {
            return None;
        }
        let current = self.store.get(&ObjectKey::new(resource, namespace, name)).await.ok()?;
        current.map(|pod| pod.to_value())
    }

    /// The PodSecurity admission's warning about an update (or a create by PUT or apply) of
    /// a pod, replication controller or pod template: as for a create, but for a pod only
    /// when the write changed it significantly from `before` (its images, containers, seccomp
    /// annotations), as Kubernetes' `ValidatePod`; a workload's every write is checked.
    pub fn pod_security_update_warnings(
        &self,
        resource: &ResourceType,
        before: Option<&Value>,
        written: &StoredObject,
    ) -> Vec<String> {
        if Self::is_pod(resource)
            && before.is_some_and(|old| !pod_security::significant_update(old, &written.to_value()))
        {
            return Vec::new();
        }
        self.pod_security_warnings(resource, written)
    }

    /// A namespace's `pod-security.kubernetes.io/` labels as committed (`None`: it has none),
    /// which a write of it is compared with for [`Self::pod_security_relabel_warnings`].
    pub fn pod_security_labels(&self, namespace: &str) -> Option<Arc<BTreeMap<String, String>>> {
        self.store.pod_security_labels(namespace)
    }

    /// The PodSecurity admission's warnings when namespace `name`'s enforced standard has just
    /// become stricter than under its labels `before` (by the write, dry run or not, of
    /// `written`): which of its pods break the new one,
    /// each reason once with the first pod (by name) giving it, as Kubernetes words them
    /// (`existing pods in namespace "ns" violate the new PodSecurity enforce level
    /// "restricted:latest"`, `web (and 2 other pods): privileged, seccompProfile`).
    pub async fn pod_security_relabel_warnings(
        &self,
        name: &str,
        before: Option<&BTreeMap<String, String>>,
        written: &Value,
    ) -> Vec<String> {
        let (old, _) = pod_security::Policy::of(before.into_iter().flat_map(label_pairs));
        let (new, _) = pod_security::Policy::of(labels_of(written));
        let (old, new) = (old.enforce, new.enforce);
        let relaxed = new.version == old.version && new.level <= old.level;
        if new == old || new.level == pod_security::Level::Privileged || relaxed {
            return Vec::new();
        }
        let pods =
            match self.list(resources::core("pods"), Some(name), &ListOptions::default()).await {
                Ok(list) => list.items,
                Err(_) => return Vec::new(),
            };
        // Each set of reasons, with the first pod by name giving it and how many do.
        let mut found: Vec<(String, String, usize)> = Vec::new();
        let checked = pods.len().min(MAX_PODS_CHECKED_ON_RELABEL);
        for pod in &pods[..checked] {
            let reasons = pod_security::violated_reasons(&pod.to_value(), new.level);
            if reasons.is_empty() {
                continue;
            }
            let pod_name = &pod.key.name;
            match found.iter_mut().find(|(r, _, _)| *r == reasons) {
                Some((_, first, count)) => {
                    *count += 1;
                    if pod_name < first {
                        first.clone_from(pod_name);
                    }
                }
                None => found.push((reasons, pod_name.clone(), 1)),
            }
        }
        let mut warnings = Vec::new();
        if checked < pods.len() {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {} existing pods",
                pods.len()
            ));
        }
        if !found.is_empty() {
            warnings.push(format!(
                "existing pods in namespace {name:?} violate the new PodSecurity enforce level {:?}",
                new.label()
            ));
        }
        let mut named: Vec<String> = found
            .into_iter()
            .map(|(reasons, first, count)| match count {
                1 => format!("{first}: {reasons}"),
                2 => format!("{first} (and 1 other pod): {reasons}"),
                _ => format!("{first} (and {} other pods): {reasons}", count - 1),
            })
            .collect();
        named.sort();
        warnings.extend(named);
        warnings
    }

    /// The LimitRanges the LimitRanger admits a write of `resource` in `namespace` against:
    /// it admits only pods and claims (no other write reads them).
    fn limit_ranges(&self, resource: &ResourceType, namespace: &str) -> Vec<Value> {
        if !resource.group.is_empty() || !matches!(resource.kind, "Pod" | "PersistentVolumeClaim") {
            return Vec::new();
        }
        self.store.limit_ranges(namespace).iter().map(|range| range.to_value()).collect()
    }

    /// The LimitRanger's check of a pod or claim against its namespace's `ranges`: outside
    /// them, the write is forbidden (403), with every reason.
    fn check_limit_ranges(
        &self,
        resource: &'static ResourceType,
        name: &str,
        ranges: &[Value],
        object: &Value,
    ) -> Result<(), ApiError> {
        // Range by range, the first one the object breaks refusing it with its problems, as
        // Kubernetes' LimitRanger.
        for range in ranges {
            let range = std::slice::from_ref(range);
            let problems = match resource.kind {
                "Pod" => limit_ranger::check_pod(range, object),
                "PersistentVolumeClaim" => limit_ranger::check_claim(range, object),
                _ => return Ok(()),
            };
            if !problems.is_empty() {
                let why = error::aggregate(problems);
                return Err(ApiError::forbidden(resource, name, why, Vec::new()));
            }
        }
        Ok(())
    }

    /// The namespace lifecycle admission of a create, a subresource's too (a binding, an
    /// eviction, a token request; `resource` and `name` the object's they are posted to): the
    /// namespace must exist and not be terminating.
    pub fn check_namespace_accepts(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        match self.store.namespace(namespace) {
            Some(NamespaceState::Active) => Ok(()),
            Some(NamespaceState::Terminating) => Err(ApiError::forbidden(
                resource,
                name,
                format!(
                    "unable to create new content in namespace {namespace} because it is being \
                     terminated"
                ),
                vec![FieldError {
                    reason: "NamespaceTerminating",
                    field: "metadata.namespace".into(),
                    message: format!("namespace {namespace} is being terminated"),
                }],
            )),
            None => Err(ApiError::not_found(namespaces(), namespace)),
        }
    }

    /// Replaces an object (PUT). Server-owned metadata and, for types with a status
    /// subresource, the status are kept from the stored object.
    pub async fn update(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if let Some(view) = View::of(resource) {
            let body = view.stored_form(body, false)?;
            let key = ObjectKey::new(view.storage, namespace, name);
            if let Some(current) = self.store.get(&key).await? {
                view.check_update(&current.to_value(), &body)?;
            }
            let updated = Box::pin(self.update(view.storage, namespace, name, body, options));
            return Ok(view.object(updated.await.map_err(|e| view.own_error(e))?));
        }
        let ownership = Ownership::Update(self.manager(options));
        self.replace(resource, namespace, name, body, options.dry_run, Part::Main, ownership).await
    }

    /// A PUT of an object: `update`, or, for the kinds whose update may create
    /// (`ResourceType::creates_on_update`), a create when there is no such object, refused
    /// when `options.create_denied` says why the user may not create. True when it created.
    pub async fn put(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<(Arc<StoredObject>, bool), ApiError> {
        if !resource.creates_on_update() {
            return Ok((self.update(resource, namespace, name, body, options).await?, false));
        }
        match self.update(resource, namespace, name, body.clone(), options).await {
            Err(ApiError::NotFound { resource: plural, name: missing, .. })
                if plural == resource.plural && missing == name =>
            {
                if let Some(denial) = &options.create_denied {
                    return Err(ApiError::forbidden(resource, name, denial.clone(), Vec::new()));
                }
                let mut body = body;
                if let Some(object) = body.as_object_mut() {
                    let meta = object.entry("metadata").or_insert_with(|| json!({}));
                    if let Some(meta) = meta.as_object_mut() {
                        // An update's precondition, which a create takes no account of.
                        meta.remove("resourceVersion");
                    }
                }
                Ok((self.create(resource, namespace, body, options).await?, true))
            }
            replaced => Ok((replaced?, false)),
        }
    }

    /// Replaces only the status of an object (PUT on the `status` subresource).
    pub async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let ownership = Ownership::Update(self.manager(options));
        self.replace(resource, namespace, name, body, options.dry_run, Part::Status, ownership)
            .await
    }

    /// `namespaces/{name}/finalize`: sets the namespace's `spec.finalizers` to the body's
    /// and changes nothing else. A deleted namespace left with none goes.
    pub async fn finalize(
        &self,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let ownership = Ownership::Update(self.manager(options));
        self.replace(namespaces(), "", name, body, options.dry_run, Part::Finalize, ownership).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn replace(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        dry_run: bool,
        part: Part,
        ownership: Ownership<'_>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let mut object = typed_object(resource, body)?;
        let meta = metadata(&mut object)?;
        check_names(resource, meta, namespace, name)?;
        set_namespace(resource, namespace, meta)?;
        owners::dedup(meta);
        let requested_rv = requested_revision(meta)?;
        let key = ObjectKey::new(resource, namespace, name);
        // A uid in the body must be the stored object's, as in Kubernetes (a 409 otherwise):
        // a replace meant for an object deleted and created again under the same name fails.
        let uid = meta.get("uid").and_then(Value::as_str).filter(|u| !u.is_empty());
        let requested =
            Preconditions { resource_version: requested_rv, uid: uid.map(String::from) };
        let mut attempts = 0;
        // What this update has charged to quotas so far: a retry charges only the rest.
        let mut charged = quota::Usage::new();
        loop {
            attempts += 1;
            let current =
                self.store.get(&key).await?.ok_or_else(|| ApiError::not_found(resource, name))?;
            // A stale write is a conflict before anything else, as in Kubernetes: a client
            // retrying on 409 must not meet a 422 about a state it has not seen.
            requested.check(&current)?;
            if requested_rv.is_none() && !updates_unconditionally(resource) {
                // As Kubernetes' storage says it, of the resource (its Status names no kind).
                let detail = "must be specified for an update";
                let cause = FieldError::invalid_printed("metadata.resourceVersion", "0x0", detail);
                let (kind, group) = (resource.plural, resource.group);
                return Err(ApiError::Invalid {
                    kind,
                    group,
                    name: name.into(),
                    causes: vec![cause],
                });
            }
            let mut current_value = current.to_value();
            let writes_metadata = match part {
                Part::Main | Part::Finalize => true,
                Part::Status => resource.group.is_empty(),
                Part::EphemeralContainers => false,
            };
            if writes_metadata {
                let errors = validation::validate_deletion_fields(&current_value, &object);
                if !errors.is_empty() {
                    return Err(ApiError::invalid(resource, name, errors));
                }
            }
            if part == Part::Main {
                // Read as Kubernetes decodes what it stored, with today's defaults and its
                // quantities and times in canonical form: an object an older build stored is
                // not changed by an update that only decodes it again. A stored value that no
                // longer decodes is left as it is (the update's own is checked).
                let _ =
                    self.check_schema_as(resource.group, resource.kind, &mut current_value, false);
                defaults::apply(resource.kind, &mut current_value);
            }
            let mut next = merge_for_update(resource, &current_value, object.clone(), part);
            if part == Part::Status {
                defaults::status(resource.kind, &mut next);
                if Self::is_pod(resource) {
                    defaults::backfill_qos_class(&current_value, &mut next);
                }
                if resource.kind == "PersistentVolume" {
                    defaults::volume_phase_transition(&current_value, &mut next);
                }
            }
            if matches!(part, Part::Main | Part::EphemeralContainers | Part::Finalize) {
                defaults::apply(resource.kind, &mut next);
                // Compared once defaulted, as Kubernetes decodes with its defaults.
                if resource.generation_changes(&current_value, &next) {
                    count_in_generation(metadata(&mut next)?);
                }
            }
            let fields = match &ownership {
                Ownership::Update(manager) | Ownership::Scaled(manager) => {
                    let mut fields = match part {
                        Part::Main => ManagedFields::requested(&current_value, &object)?,
                        Part::Status | Part::Finalize | Part::EphemeralContainers => {
                            ManagedFields::of(&current_value)?
                        }
                    };
                    let mut writer = writer(resource, manager, Operation::Update, part);
                    if matches!(ownership, Ownership::Scaled(_)) {
                        writer.subresource = "scale";
                    }
                    fields.record_update(
                        Some(&current_value),
                        &next,
                        &writer,
                        has_status(resource),
                    );
                    fields
                }
                Ownership::Applied(fields) => fields.clone(),
            };
            fields.write_to(&mut next);
            if Self::is_pod(resource) && part == Part::Main {
                // On update too, as Kubernetes' plugin: a pod replaced without the defaults
                // gets them back (its tolerations may only grow).
                default_tolerations::admit(&mut next);
                priority::keep_on_update(&current_value, &mut next);
            }
            let (allocated, freed) = if Self::is_service(resource) && part == Part::Main {
                self.services.reallocate(&current_value, &mut next, name, dry_run)?
            } else {
                Default::default()
            };
            let mut errors = validation::validate_object(resource, &next);
            errors.extend(validation::validate_metadata_update(&current_value, &next));
            match part {
                Part::Main => {
                    errors.extend(validation::validate_update(resource, &current_value, &next))
                }
                Part::EphemeralContainers => {
                    errors.extend(validation::validate_ephemeral_update(&current_value, &next))
                }
                Part::Status => errors.extend(validation::validate_status_update(
                    resource,
                    &current_value,
                    &next,
                )),
                Part::Finalize => {}
            }
            // A claim is admitted on update too (a pod's resources cannot change), unless it
            // is being deleted (as Kubernetes' LimitRanger: its finalizers must be able to go).
            if errors.is_empty()
                && part == Part::Main
                && resource.kind == "PersistentVolumeClaim"
                && !crate::model::is_being_deleted(&current_value)
            {
                let limit_ranges = self.limit_ranges(resource, namespace);
                if let Err(refused) = self.check_limit_ranges(resource, name, &limit_ranges, &next)
                {
                    self.services.release(&allocated);
                    return Err(refused);
                }
            }
            if errors.is_empty() {
                defaults::canonicalize(resource.kind, &mut next);
            }
            let precondition = requested.check(&current);
            let same = unchanged(&current_value, &next);
            if !errors.is_empty() || precondition.is_err() || same || dry_run {
                // Nothing is written: what was allocated for it goes back.
                self.services.release(&allocated);
            }
            if !errors.is_empty() {
                return Err(ApiError::invalid(resource, name, errors));
            }
            if part == Part::Main {
                // (Only a PriorityClass can be refused here: nothing was allocated for it.)
                self.admit_priority_class(resource, name, &next)?;
                if Self::is_namespace(resource) {
                    check_pod_security_labels(name, Some(&current_value), &next)?;
                }
            }
            if part == Part::EphemeralContainers && Self::is_pod(resource) {
                service_account::admit_ephemeral(&self.store, namespace, &next)
                    .map_err(|why| ApiError::forbidden(resource, name, why, Vec::new()))?;
            }
            let pod_spec_part = matches!(part, Part::Main | Part::EphemeralContainers);
            if pod_spec_part && Self::is_pod(resource) {
                // (Nothing is allocated for a pod.)
                self.enforce_pod_security(resource, namespace, name, &next, Some(&current_value))?;
            }
            precondition?;
            if part == Part::Main && resource.kind == "PersistentVolumeClaim" {
                claim_resize::admit(resource, name, &current_value, &next)?;
            }
            let dry_answer = |next| {
                Arc::new(StoredObject::from_value(key.clone(), next, current.resource_version))
            };
            if same {
                return Ok(if dry_run { dry_answer(next) } else { current });
            }
            // A service or claim that grows is charged to the quotas, their lock held until
            // it is stored (what an earlier attempt charged is not charged again); a dry run
            // is judged by them, charging nothing.
            let mut growth = resource_quota::update_usage(resource, &current_value, &next);
            growth.retain(|name, amount| {
                *amount = amount.minus(charged.get(name).copied().unwrap_or_default());
                amount.millis > 0
            });
            let _held = if part == Part::Main && !growth.is_empty() {
                let charge = self.charge_quotas(
                    resource,
                    namespace,
                    name,
                    &next,
                    Some(growth.clone()),
                    dry_run,
                );
                match charge.await {
                    Ok(guard) => {
                        growth.iter().for_each(|(r, amount)| quota::add(&mut charged, r, *amount));
                        guard
                    }
                    Err(refused) => {
                        if !dry_run {
                            self.services.release(&allocated);
                        }
                        return Err(refused);
                    }
                }
            } else {
                None
            };
            if dry_run {
                return Ok(dry_answer(next));
            }
            // As Kubernetes' `ShouldDeleteDuringUpdate`: the update that leaves an object
            // marked for deletion without finalizers deletes it, unless it is still within a
            // grace period (a pod its node stops, which then deletes it itself).
            let finalized = json::at(&current_value, "/metadata/deletionTimestamp").is_some()
                && json::at(&current_value, "/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_none_or(|grace| grace == 0)
                && !has_finalizers(resource, &next);
            let preconditions =
                Preconditions { resource_version: Some(current.resource_version), uid: None };
            let result = if finalized {
                // Answered with the object as this update left it (Kubernetes'
                // `deleteWithoutFinalizers`: clients expect the updated object of a PUT).
                let updated = dry_answer(next);
                self.store.delete(key.clone(), preconditions).await.map(|_| updated)
            } else {
                self.store.update(key.clone(), next, preconditions).await
            };
            match &result {
                // Deleted: all it held goes, what this update took for it too.
                Ok(_) if finalized && Self::is_service(resource) => {
                    self.services.release(&allocated);
                    self.services.release_service(&current_value);
                }
                Ok(_) => self.services.release(&freed),
                Err(_) => self.services.release(&allocated),
            }
            match result {
                // The object changed between our read and our write; an unconditional update
                // simply tries again on the newer state.
                Err(StoreError::Conflict { .. })
                    if requested_rv.is_none() && attempts < UPDATE_RETRIES =>
                {
                    self.store.settle(resource).await?;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Patches an object (or only its status): read, apply, write with the read revision as
    /// precondition, and retry when another writer got in between (unless the patch itself
    /// names a resourceVersion, which then must match).
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status_only: bool,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let part = if status_only { Part::Status } else { Part::Main };
        let patched = self.patch_part(resource, namespace, name, patch_type, patch, part, options);
        Ok(patched.await?.0)
    }

    /// As [`Self::patch`], with what the patched object lost on the way to being stored (the
    /// fields its kind does not declare, repeated owner references), which Kubernetes warns of.
    #[allow(clippy::too_many_arguments)]
    pub async fn patch_with_notes(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status_only: bool,
        options: &WriteOptions,
    ) -> Result<(Arc<StoredObject>, PatchNotes), ApiError> {
        let part = if status_only { Part::Status } else { Part::Main };
        self.patch_part(resource, namespace, name, patch_type, patch, part, options).await
    }

    /// Replaces a pod's ephemeral containers (PUT `pods/{name}/ephemeralcontainers`): they may
    /// only be added to; nothing else of the pod changes.
    pub async fn update_ephemeral_containers(
        &self,
        namespace: &str,
        name: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let ownership = Ownership::Update(self.manager(options));
        let (pods, part) = (resources::core("pods"), Part::EphemeralContainers);
        self.replace(pods, namespace, name, body, options.dry_run, part, ownership).await
    }

    /// Patches a pod's ephemeral containers (PATCH `pods/{name}/ephemeralcontainers`, what
    /// `kubectl debug` sends).
    pub async fn patch_ephemeral_containers(
        &self,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        options: &WriteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let (pods, part) = (resources::core("pods"), Part::EphemeralContainers);
        Ok(self.patch_part(pods, namespace, name, patch_type, patch, part, options).await?.0)
    }

    #[allow(clippy::too_many_arguments)]
    async fn patch_part(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        part: Part,
        options: &WriteOptions,
    ) -> Result<(Arc<StoredObject>, PatchNotes), ApiError> {
        let view = View::of(resource);
        // Errors in the words of the resource asked for (a view's, not its storage's).
        let patched = async {
            let resource = view.map_or(resource, |v| v.storage);
            let key = ObjectKey::new(resource, namespace, name);
            let manager = self.manager(options);
            let mut attempts = 0;
            loop {
                attempts += 1;
                let current = self
                    .store
                    .get(&key)
                    .await?
                    .ok_or_else(|| ApiError::not_found(resource, name))?;
                let current_rv = current.resource_version.to_string();
                let mut stored = current.to_value();
                // Decoded first, as Kubernetes decodes what it stored before patching: a field its
                // kind does not declare (an in-process writer's) is not the patch's fault.
                let (group, kind) = (resource.group, resource.kind);
                let _ = self.check_schema_as(group, kind, &mut stored, false);
                // A view's patch applies to the view's form of the object.
                let mut next = match view {
                    Some(view) => {
                        let patched =
                            patch::apply(&view.view_form(stored.clone()), patch_type, patch)?;
                        let next = view.stored_form(patched, false)?;
                        view.check_update(&stored, &next)?;
                        next
                    }
                    None => patch::apply(&stored, patch_type, patch)?,
                };
                // A patch that moves the object to another namespace, in the patch handler's words
                // (a PUT's are a create's).
                let patched_namespace =
                    json::at(&next, "/metadata/namespace").and_then(Value::as_str);
                if patched_namespace
                    .is_some_and(|n| resource.namespaced && n != namespace && !n.is_empty())
                {
                    return Err(ApiError::BadRequest(NAMESPACE_MISMATCH.into()));
                }
                // A patch has no uid precondition: a uid it changes is an immutable field changed.
                let patched_uid = json::at(&next, "/metadata/uid").and_then(Value::as_str);
                if let Some(uid) = patched_uid.filter(|uid| !uid.is_empty() && *uid != current.uid)
                {
                    let error = FieldError::invalid("metadata.uid", uid, "field is immutable");
                    return Err(ApiError::invalid(resource, name, vec![error]));
                }
                let unknown_fields = self
                    .check_schema_as(group, kind, &mut next, false)
                    .map_err(|decoding| patch_not_decodable(patch_type, patch, &next, decoding))?;
                if options.strict_fields
                    && !(options.patch_findings.is_empty() && unknown_fields.is_empty())
                {
                    let unknown = unknown_fields.iter().map(|field| unknown_field_message(field));
                    let findings: Vec<String> =
                        options.patch_findings.iter().cloned().chain(unknown).collect();
                    let decoding = format!("strict decoding error: {}", findings.join(", "));
                    return Err(patch_not_decodable(patch_type, patch, &next, decoding));
                }
                // (What is not an object is refused as the update's body below.)
                let meta = next.get_mut("metadata").and_then(Value::as_object_mut);
                let repeated_owners = meta.map(owners::dedup).unwrap_or_default();
                let notes = PatchNotes { unknown_fields, repeated_owners };
                // A resourceVersion the patch names (or sets) is a precondition `replace` checks;
                // otherwise the patch applies to whatever version it was computed on.
                let stale = json::at(&next, "/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|rv| rv != current_rv);
                // (A uid it names is no precondition: the patch applies again to the object
                // a racing write left, and a uid that is not that object's is refused above.)
                let pinned = stale || json::at(patch, "/metadata/resourceVersion").is_some();
                if !pinned {
                    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("resourceVersion".into(), json!(current_rv));
                    }
                }
                let ownership = Ownership::Update(manager);
                let written =
                    self.replace(resource, namespace, name, next, options.dry_run, part, ownership);
                match written.await {
                    Err(ApiError::Conflict { .. }) if !pinned && attempts < UPDATE_RETRIES => {
                        self.store.settle(resource).await?;
                    }
                    other => {
                        let written = other.map(|written| match view {
                            Some(view) => view.object(written),
                            None => written,
                        });
                        return written.map(|written| (written, notes));
                    }
                }
            }
        }
        .await;
        match view {
            Some(view) => patched.map_err(|e| view.own_error(e)),
            None => patched,
        }
    }

    /// Deletes an object. Objects with finalizers are only marked (deletionTimestamp set) and
    /// go once their finalizers are removed; namespaces are marked Terminating, emptied by the
    /// namespace controller, and go then.
    pub async fn delete(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if let Some(view) = View::of(resource) {
            let deleted = Box::pin(self.delete(view.storage, namespace, name, options)).await;
            let deleted = deleted.map_err(|e| view.own_error(e))?;
            return Ok(view.object(deleted));
        }
        // A delete that marks the object (a finalizer, a graceful pod deletion) writes it: one
        // that met a newer write (a controller's status, an agent's) is tried again on it, as
        // Kubernetes' storage does, unless the client pinned a resourceVersion.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.delete_once(resource, namespace, name, options).await {
                Err(ApiError::Conflict { .. })
                    if options.precondition_resource_version.is_none()
                        && attempts < UPDATE_RETRIES =>
                {
                    self.store.settle(resource).await?;
                }
                done => return done,
            }
        }
    }

    async fn delete_once(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = ObjectKey::new(resource, namespace, name);
        let current =
            self.store.get(&key).await?.ok_or_else(|| ApiError::not_found(resource, name))?;
        let asked_rv = options.precondition_resource_version.as_deref();
        check_delete_preconditions(
            resource,
            &current,
            options.precondition_uid.as_deref(),
            asked_rv,
        )?;
        // Checked above as Kubernetes checks them; the store checks them again as it deletes.
        let preconditions = Preconditions {
            resource_version: asked_rv.map(|_| current.resource_version),
            uid: options.precondition_uid.clone(),
        };
        if resource.plural == "namespaces" && PROTECTED_NAMESPACES.contains(&name) {
            let message = "this namespace may not be deleted".to_string();
            return Err(ApiError::forbidden(resource, name, message, Vec::new()));
        }
        if is_system_priority_class(resource, name) {
            let message = "this is a system priority class and cannot be deleted".to_string();
            return Err(ApiError::forbidden(resource, name, message, Vec::new()));
        }
        let dry_run = options.dry_run;
        if resource.plural == "namespaces" {
            let value = current.to_value();
            return self.delete_namespace(current, value, options).await;
        }
        // Orphan and Foreground leave the object marked with a finalizer for the garbage
        // collector; Background deletes it now and the collector follows with its dependents.
        let value = current.to_value();
        let finalizer = collection_finalizer(resource, &value, options);
        let grace = options.grace_period_seconds;
        if resource.plural == "pods" {
            return self.delete_pod(current, value, finalizer, preconditions, options).await;
        }
        if let Some(finalizer) = finalizer {
            return self.mark_for_collection(current, finalizer, 0, dry_run).await;
        }
        // The collector's finalizers an earlier delete left go, as this one's policy says; with
        // no other finalizer left the object goes now (pinned to the version that had them).
        let mut preconditions = preconditions;
        let value = match without_collection_finalizers(&value) {
            Some(stripped) => {
                preconditions.resource_version = Some(current.resource_version);
                stripped
            }
            None => value,
        };
        self.delete_object(current, value, preconditions, grace, dry_run).await
    }

    /// Deletes a pod: marks it with its grace period and the collector's finalizers this
    /// delete leaves, in one write, for its node agent to stop it first; one already marked
    /// changes only when this delete shortens its grace period (then with the finalizers too),
    /// as Kubernetes' `BeforeDelete` and its update for graceful deletion do.
    async fn delete_pod(
        &self,
        current: Arc<StoredObject>,
        value: Value,
        finalizer: Option<&'static str>,
        mut preconditions: Preconditions,
        options: &DeleteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let dry_run = options.dry_run;
        if let Some(finalizer) = finalizer.filter(|_| !current.deleting) {
            let grace = pod_grace(&value, options);
            return self.mark_for_collection(current, finalizer, grace, dry_run).await;
        }
        let collected = with_collection_finalizer(&value, finalizer);
        let grace = options.grace_period_seconds;
        match self.delete_pod_gracefully(&current, collected.clone(), options).await? {
            PodDeletion::Pending(marked) => Ok(marked),
            PodDeletion::Now(marked) if marked.resource_version != current.resource_version => {
                // Deleted as marked; a version the client pinned was the one marked.
                if preconditions.resource_version.is_some() {
                    preconditions.resource_version = Some(marked.resource_version);
                }
                self.delete_marked_pod(marked, preconditions, grace, dry_run).await
            }
            PodDeletion::Now(_) => {
                // Marked to go at once before: it goes, or stays held, with the finalizers as
                // this delete leaves them (pinned to the version it changes).
                if collected != value {
                    preconditions.resource_version = Some(current.resource_version);
                }
                self.delete_object(current, collected, preconditions, grace, dry_run).await
            }
        }
    }

    /// Deletes a pod this request has just marked with no grace period. Its node agent, which
    /// watches it, may have stopped and removed it in between: then the deletion is done and
    /// the marked pod is the answer, as Kubernetes' storage ignores that NotFound (a 404 would
    /// tell the client the pod was not there to delete).
    async fn delete_marked_pod(
        &self,
        marked: Arc<StoredObject>,
        preconditions: Preconditions,
        grace: Option<i64>,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let value = marked.to_value();
        match self.delete_object(marked.clone(), value, preconditions, grace, dry_run).await {
            Err(ApiError::NotFound { .. }) => Ok(marked),
            done => done,
        }
    }

    /// Writes `value`, the object `current` marked for deletion, pinned to `current`'s
    /// version; a dry run answers what would have been written.
    async fn write_marked(
        &self,
        current: &StoredObject,
        value: Value,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = current.key.clone();
        if dry_run {
            return Ok(Arc::new(StoredObject::from_value(key, value, current.resource_version)));
        }
        let preconditions =
            Preconditions { resource_version: Some(current.resource_version), uid: None };
        Ok(self.store.update(key, value, preconditions).await?)
    }

    /// The AlreadyExists error of a create whose name `key` holds, said to be about an object
    /// being deleted when the one holding it is (a create racing a deletion's finalizers), as
    /// Kubernetes words it.
    async fn name_taken(&self, key: ObjectKey) -> ApiError {
        let being_deleted = matches!(self.store.get(&key).await, Ok(Some(held)) if held.deleting);
        ApiError::AlreadyExists {
            resource: key.resource.plural,
            group: key.resource.group,
            name: key.name,
            being_deleted,
        }
    }

    /// Marks an object for deletion with a garbage-collector finalizer (`orphan` or
    /// `foregroundDeletion`); the collector removes it once the dependents are dealt with.
    async fn mark_for_collection(
        &self,
        current: Arc<StoredObject>,
        finalizer: &str,
        grace: i64,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        // One way of collecting dependents replaces the other, as in Kubernetes.
        let before = current.to_value();
        let mut value = with_collection_finalizer(&before, Some(finalizer));
        let unchanged = value == before;
        let meta = metadata(&mut value)?;
        let marked = meta.contains_key("deletionTimestamp");
        if unchanged && marked {
            return Ok(current);
        }
        if !marked {
            mark_deleting(meta, deadline_after(grace), grace);
        }
        self.write_marked(&current, value, dry_run).await
    }

    /// Graceful pod deletion, as Kubernetes' storage does it: the pod is marked (its
    /// deletionTimestamp and grace period) so that its node agent can stop it and then delete
    /// it with a grace period of 0. A pod that is to go at once (not bound to a node, finished,
    /// or a grace period of 0) is marked with 0 and then deleted, so a watch sees it marked
    /// before it goes; one already marked with 0 goes without another write.
    async fn delete_pod_gracefully(
        &self,
        current: &Arc<StoredObject>,
        mut pod: Value,
        options: &DeleteOptions,
    ) -> Result<PodDeletion, ApiError> {
        let mut grace = pod_grace(&pod, options);
        let meta = metadata(&mut pod)?;
        if meta.contains_key("deletionTimestamp") {
            let pending = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
            if pending.is_none_or(|pending| pending == 0) {
                return Ok(PodDeletion::Now(current.clone()));
            }
            // Only a grace period given may shorten a pending one (the pod's own default, or
            // none for a pod that has since ended, are for its first delete), as Kubernetes'
            // `BeforeDelete`.
            let Some(given) = options.grace_period_seconds else {
                return Ok(PodDeletion::Pending(current.clone()));
            };
            grace = if given < 0 { 1 } else { given.min(MAX_GRACE_SECONDS) };
            if !shorten_grace(meta, grace) {
                return Ok(PodDeletion::Pending(current.clone()));
            }
        } else {
            mark_deleting(meta, deadline_after(grace), grace);
        }
        let marked = self.write_marked(current, pod, options.dry_run).await?;
        Ok(if grace == 0 { PodDeletion::Now(marked) } else { PodDeletion::Pending(marked) })
    }

    /// Deletes a non-namespace object, or marks it for deletion when it has finalizers;
    /// `value` is the object as this delete leaves it (`current`, or with the collector's
    /// finalizers gone).
    async fn delete_object(
        &self,
        current: Arc<StoredObject>,
        value: Value,
        preconditions: Preconditions,
        grace: Option<i64>,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = current.key.clone();
        if has_finalizers(key.resource, &value) {
            let mut marked = value;
            let meta = metadata(&mut marked)?;
            if current.deleting {
                // A pod's node agent deletes with no grace once it has stopped the pod: then
                // the update that removes the last finalizer deletes it.
                // (A negative grace period is the shortest there is, 1 s, as for pods.)
                let grace = grace.map(|grace| if grace < 0 { 1 } else { grace });
                let shortened = grace.is_some_and(|grace| shorten_grace(meta, grace));
                if !shortened && marked == current.to_value() {
                    return Ok(current);
                }
            } else {
                mark_deleting(meta, now(), 0);
            }
            return self.write_marked(&current, marked, dry_run).await;
        }
        if dry_run {
            return Ok(current);
        }
        let deleted = self.store.delete(key, preconditions).await?;
        if Self::is_service(deleted.key.resource) {
            self.services.release_service(&deleted.to_value());
        }
        Ok(deleted)
    }

    /// Marks the namespace Terminating (new objects are refused there); the namespace
    /// controller empties it and then removes the `kubernetes` entry of its `spec.finalizers`,
    /// with which it goes (see `replace`). A namespace without finalizers goes at once, as in
    /// Kubernetes.
    async fn delete_namespace(
        &self,
        current: Arc<StoredObject>,
        mut value: Value,
        options: &DeleteOptions,
    ) -> Result<Arc<StoredObject>, ApiError> {
        if current.deleting {
            // Deleting it again answers it as it is while anything holds it (its content's
            // finalizer, as the namespace controller is at work, or another), as Kubernetes'
            // namespace storage does; once nothing does, it goes.
            if has_finalizers(current.key.resource, &value) {
                return Ok(current);
            }
            if options.dry_run {
                return Ok(current);
            }
            return Ok(self.store.delete(current.key.clone(), Preconditions::default()).await?);
        }
        // The first delete only marks it (even one its content's finalizer no longer holds,
        // which then waits for another), with the garbage collector's finalizer its policy
        // asks for, and no other (as Kubernetes' `shouldHaveOrphanFinalizer` and
        // `shouldHaveDeleteDependentsFinalizer` choose them: kept without a policy).
        let meta = metadata(&mut value)?;
        meta.insert("deletionTimestamp".into(), json!(now()));
        if let Some(policy) = options.propagation_policy.as_deref() {
            let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
            if !finalizers.is_array() {
                *finalizers = json!([]);
            }
            let list = finalizers.as_array_mut().expect("set to an array above");
            list.retain(|f| f != ORPHAN_FINALIZER && f != FOREGROUND_FINALIZER);
            match policy {
                "Orphan" => list.push(json!(ORPHAN_FINALIZER)),
                "Foreground" => list.push(json!(FOREGROUND_FINALIZER)),
                _ => {}
            }
            if list.is_empty() {
                meta.remove("finalizers");
            }
        }
        value["status"] = json!({"phase": "Terminating"});
        self.write_marked(&current, value, options.dry_run).await
    }

    /// Deletes every object a list with `options` would return; returns that list, as it was
    /// listed (as Kubernetes' `DeleteCollection` does). With a `limit`, only the page that
    /// list returns is deleted, and the page's continue token comes back with it; a continue
    /// token alone deletes from where it points on (and one that cannot be read, nothing).
    pub async fn delete_collection(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        list: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<ObjectList, ApiError> {
        let paged = list.limit.is_some_and(|limit| limit > 0);
        let all = ListOptions { limit: None, ..list.clone() };
        let page = self.list(resource, namespace, if paged { list } else { &all }).await?;
        // A collection's delete passes over the system PriorityClasses, which a delete of one
        // refuses, rather than failing on them.
        let deletable =
            page.items.iter().filter(|o| !is_system_priority_class(resource, &o.key.name));
        for object in deletable {
            match self.delete(resource, &object.key.namespace, &object.key.name, options).await {
                Ok(_) | Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// All but the status (of kinds with a status subresource) and, for a namespace, its
    /// `spec.finalizers`.
    Main,
    Status,
    /// A namespace's `spec.finalizers` only (`namespaces/{name}/finalize`).
    Finalize,
    /// A pod's `spec.ephemeralContainers` only (`pods/{name}/ephemeralcontainers`).
    EphemeralContainers,
}

/// What a dry-run create answers: the object as it would be, without a resourceVersion (it
/// has none, never having been stored), as Kubernetes answers it.
fn not_stored(prepared: PreparedObject) -> StoredObject {
    let key = prepared.key.clone();
    let mut value = prepared.at_revision(0).to_value();
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let raw = serde_json::to_vec(&value).expect("a JSON value serializes");
    StoredObject::from_raw(key, 0, raw.into()).expect("just serialized")
}

/// Whether an update may leave out `metadata.resourceVersion` (and then applies to whatever is
/// stored): not for PodDisruptionBudgets and Leases, whose Kubernetes strategies refuse it
/// (a budget's allowance and a lease's holder must not be overwritten blind).
fn updates_unconditionally(resource: &ResourceType) -> bool {
    !matches!(
        (resource.group, resource.plural),
        ("policy", "poddisruptionbudgets") | ("coordination.k8s.io", "leases")
    )
}

/// The garbage collector's finalizer a delete leaves on `object`, as Kubernetes'
/// `shouldOrphanDependents` and `shouldDeleteDependents` choose it: the policy asked for;
/// without one, the one an earlier delete left; else the kind's default (core/v1
/// ReplicationControllers orphan). Events have no dependents to collect.
fn collection_finalizer(
    resource: &ResourceType,
    object: &Value,
    options: &DeleteOptions,
) -> Option<&'static str> {
    if resource.plural == "events" {
        return None;
    }
    let held = || {
        let finalizers = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
        finalizers.into_iter().flatten().find_map(|f| match f.as_str() {
            Some(ORPHAN_FINALIZER) => Some("Orphan"),
            Some(FOREGROUND_FINALIZER) => Some("Foreground"),
            _ => None,
        })
    };
    let default = if resource.plural == "replicationcontrollers" { "Orphan" } else { "Background" };
    match options.propagation_policy.as_deref().or_else(held).unwrap_or(default) {
        "Orphan" => Some(ORPHAN_FINALIZER),
        "Foreground" => Some(FOREGROUND_FINALIZER),
        _ => None,
    }
}

/// `object` with the garbage collector's finalizers as a delete leaves them: `finalizer`
/// alone of the two, or neither.
fn with_collection_finalizer(object: &Value, finalizer: Option<&str>) -> Value {
    let list = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
    let names = list.into_iter().flatten().filter_map(Value::as_str);
    let held: Vec<&str> =
        names.filter(|f| [ORPHAN_FINALIZER, FOREGROUND_FINALIZER].contains(f)).collect();
    // Holding just that one already, it stays as it is (in its place).
    if held == finalizer.into_iter().collect::<Vec<_>>() {
        return object.clone();
    }
    let mut collected = without_collection_finalizers(object).unwrap_or_else(|| object.clone());
    if let Some(finalizer) = finalizer {
        let meta = collected.as_object_mut().and_then(|o| o.get_mut("metadata"));
        if let Some(meta) = meta.and_then(Value::as_object_mut) {
            let list = meta.entry("finalizers").or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            list.as_array_mut().expect("set to an array above").push(json!(finalizer));
        }
    }
    collected
}

/// `object` without the garbage collector's finalizers, when it has any.
fn without_collection_finalizers(object: &Value) -> Option<Value> {
    let collected = |f: &Value| f == ORPHAN_FINALIZER || f == FOREGROUND_FINALIZER;
    let finalizers = json::at(object, "/metadata/finalizers").and_then(Value::as_array)?;
    if !finalizers.iter().any(collected) {
        return None;
    }
    let mut stripped = object.clone();
    let list = stripped["metadata"]["finalizers"].as_array_mut().expect("an array above");
    list.retain(|f| !collected(f));
    Some(stripped)
}

/// Whether an object a delete answered is still stored, marked for deletion: held by
/// finalizers (a namespace's own too) or a pod's pending grace period, not gone at once
/// (Kubernetes' `deleted` false, which a delete that does not orphan answers 202).
pub fn left_marked(resource: &ResourceType, deleted: &StoredObject) -> bool {
    let object = deleted.to_value();
    let grace = json::at(&object, "/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
    deleted.deleting && (has_finalizers(resource, &object) || grace.is_some_and(|g| g > 0))
}

/// Does anything still hold the object: its `metadata.finalizers`, and a namespace's
/// `spec.finalizers` (the namespace controller's)?
fn has_finalizers(resource: &ResourceType, object: &Value) -> bool {
    let held = |field: &str| {
        json::at(object, field).and_then(Value::as_array).is_some_and(|f| !f.is_empty())
    };
    held("/metadata/finalizers") || (resource.plural == "namespaces" && held("/spec/finalizers"))
}

/// The PodSecurity admission's check of a namespace written: its pod security labels must
/// be valid (422), unless an update leaves invalid ones as they were.
fn check_pod_security_labels(
    name: &str,
    old: Option<&Value>,
    namespace: &Value,
) -> Result<(), ApiError> {
    if !pod_security::names_any(labels_of(namespace).map(|(k, _)| k)) {
        return Ok(());
    }
    let (_, errors) = pod_security::Policy::of(labels_of(namespace));
    if errors.is_empty() {
        return Ok(());
    }
    let (_, old_errors) = pod_security::Policy::of(old.into_iter().flat_map(labels_of));
    if !old_errors.is_empty() && old_errors == errors {
        return Ok(());
    }
    Err(ApiError::Invalid { kind: "Namespace", group: "", name: name.to_string(), causes: errors })
}

/// An object's labels as the PodSecurity admission reads them (a value that is no string
/// as an empty one).
fn labels_of(object: &Value) -> impl Iterator<Item = (&str, &str)> + Clone {
    let labels = json::at(object, "/metadata/labels").and_then(Value::as_object);
    labels.into_iter().flatten().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
}

/// A label map as the PodSecurity admission reads it.
fn label_pairs(labels: &BTreeMap<String, String>) -> impl Iterator<Item = (&str, &str)> + Clone {
    labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// How many of a namespace's pods a stricter enforced standard is checked against (as
/// Kubernetes' `namespaceMaxPodsToCheck`).
const MAX_PODS_CHECKED_ON_RELABEL: usize = 3000;

/// Does `resource` have a `status` subresource (so status and the rest are written apart)?
fn has_status(resource: &ResourceType) -> bool {
    resource.subresources.iter().any(|s| s.name == "status")
}

/// The writer of a write, for managed fields.
fn writer<'a>(
    resource: &'static ResourceType,
    manager: &'a str,
    operation: Operation,
    part: Part,
) -> Writer<'a> {
    let subresource = match part {
        Part::Main => "",
        Part::Status => "status",
        Part::Finalize => "finalize",
        Part::EphemeralContainers => "ephemeralcontainers",
    };
    Writer { manager, operation, subresource, api_version: resource.api_version() }
}

/// Builds the object to store from the client's body and the stored object.
fn merge_for_update(
    resource: &ResourceType,
    current: &Value,
    mut body: Value,
    part: Part,
) -> Value {
    let has_status = has_status(resource);
    let mut next = match part {
        Part::Main => {
            if has_status {
                match current.get("status") {
                    Some(status) => body["status"] = status.clone(),
                    None => {
                        body.as_object_mut().map(|o| o.remove("status"));
                    }
                }
            }
            body
        }
        Part::Status => {
            let mut next = current.clone();
            match body.get_mut("status").map(Value::take) {
                Some(status) => next["status"] = status,
                None => {
                    next.as_object_mut().map(|o| o.remove("status"));
                }
            }
            // A core kind's status write changes its labels, annotations and the rest of its
            // metadata too, as Kubernetes' strategies for them leave it (the kubelet labels its
            // node through `nodes/status`); the other groups' kinds keep theirs
            // (`ResetObjectMetaForStatus`).
            let metadata = body.get_mut("metadata").filter(|m| m.is_object()).map(Value::take);
            if let Some(metadata) = metadata.filter(|_| resource.group.is_empty()) {
                next["metadata"] = metadata;
            }
            next
        }
        Part::Finalize => {
            let mut next = current.clone();
            let finalizers = body.pointer_mut("/spec/finalizers").map(Value::take);
            set_namespace_finalizers(&mut next, finalizers);
            // Kubernetes' finalize strategy resets only the status: the metadata sent stays.
            let metadata = body.get_mut("metadata").filter(|m| m.is_object()).map(Value::take);
            if let Some(metadata) = metadata {
                next["metadata"] = metadata;
            }
            next
        }
        Part::EphemeralContainers => {
            let mut next = current.clone();
            let ephemeral = body.pointer_mut("/spec/ephemeralContainers").map(Value::take);
            set_ephemeral_containers(&mut next, ephemeral);
            next
        }
    };
    if part == Part::Main && resource.group.is_empty() && resource.plural == "namespaces" {
        // Only `finalize` changes them, as in Kubernetes.
        set_namespace_finalizers(&mut next, json::at(current, "/spec/finalizers").cloned());
    }
    let cur_meta = current.get("metadata").cloned().unwrap_or_default();
    let meta = next["metadata"].as_object_mut().expect("metadata checked to be an object");
    for owned in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match cur_meta.get(owned) {
            Some(v) => meta.insert(owned.into(), v.clone()),
            None => meta.remove(owned),
        };
    }
    // Never stored, as Kubernetes clears it before every write.
    meta.remove("selfLink");
    if part == Part::Status && resource.kind == "Pod" {
        // Old kubelets corrupted a pod's owners through its status: they stay as they were.
        match cur_meta.get("ownerReferences") {
            Some(owners) => meta.insert("ownerReferences".into(), owners.clone()),
            None => meta.remove("ownerReferences"),
        };
    }
    next
}

/// Sets a pod's `spec.ephemeralContainers` (`None`: none).
fn set_ephemeral_containers(pod: &mut Value, ephemeral: Option<Value>) {
    match (ephemeral.filter(|e| !e.is_null()), pod.get_mut("spec").and_then(Value::as_object_mut)) {
        (Some(ephemeral), Some(spec)) => {
            spec.insert("ephemeralContainers".into(), ephemeral);
        }
        (None, Some(spec)) => {
            spec.remove("ephemeralContainers");
        }
        (_, None) => {}
    }
}

/// Sets a namespace's `spec.finalizers` (`None`: none).
fn set_namespace_finalizers(namespace: &mut Value, finalizers: Option<Value>) {
    match (finalizers, namespace.get_mut("spec").and_then(Value::as_object_mut)) {
        (Some(finalizers), Some(spec)) => {
            spec.insert("finalizers".into(), finalizers);
        }
        (Some(finalizers), None) => namespace["spec"] = json!({ "finalizers": finalizers }),
        (None, Some(spec)) => {
            spec.remove("finalizers");
        }
        (None, None) => {}
    }
}

/// Counts a change of the spec, or the first marking for deletion, in the object's
/// `generation` when it carries one (Kubernetes' `generation > 0` rule).
fn count_in_generation(meta: &mut Map<String, Value>) {
    if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
        meta.insert("generation".into(), json!(generation + 1));
    }
}

/// What a patch's result lost on the way to being stored, for the warnings Kubernetes answers
/// with.
#[derive(Debug, Default)]
pub struct PatchNotes {
    /// The paths of the fields it set that its kind does not declare.
    pub unknown_fields: Vec<String>,
    /// The uids of the owner references it repeated (stored once).
    pub repeated_owners: Vec<String>,
}

/// What a pod's deletion comes to.
enum PodDeletion {
    /// Marked, its grace period running: its node agent deletes it once it has stopped.
    Pending(Arc<StoredObject>),
    /// To be deleted now, as marked (unless finalizers hold it).
    Now(Arc<StoredObject>),
}

/// The grace period deleting `pod` gives it, as Kubernetes' pod strategy works it out: the
/// options', else its spec's (30 s by default), a negative one being 1 s; 0 for a pod no node
/// agent runs (not bound, or finished).
fn pod_grace(pod: &Value, options: &DeleteOptions) -> i64 {
    let bound =
        json::at(pod, "/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let finished = matches!(
        json::at(pod, "/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    let default_grace =
        json::at(pod, "/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(30);
    // A negative grace period asks for the shortest there is, which Kubernetes makes 1 s.
    let grace = match options.grace_period_seconds.unwrap_or(default_grace) {
        grace if grace < 0 => 1,
        grace => grace,
    };
    // A deadline past any a timestamp can name would not be one: a century is the most.
    if !bound || finished {
        0
    } else {
        grace.min(MAX_GRACE_SECONDS)
    }
}

/// The deletion deadline `grace` seconds from now.
fn deadline_after(grace: i64) -> String {
    let deadline = Utc::now() + chrono::Duration::seconds(grace);
    deadline.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Marks an object deleting from `timestamp`, with `grace` seconds; the first marking also
/// counts in its generation, as Kubernetes' storage does.
fn mark_deleting(meta: &mut Map<String, Value>, timestamp: String, grace: i64) {
    if !meta.contains_key("deletionTimestamp") {
        count_in_generation(meta);
    }
    meta.insert("deletionTimestamp".into(), json!(timestamp));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
}

/// Shortens a pending deletion's grace period to `grace`, as Kubernetes' `BeforeDelete` does:
/// only a shorter one changes it, and its deadline moves back by the difference (one marked
/// without a period gets `grace` from now). False when nothing changes.
fn shorten_grace(meta: &mut Map<String, Value>, grace: i64) -> bool {
    let pending = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
    if pending.is_some_and(|pending| grace >= pending) {
        return false;
    }
    let marked_at = meta.get("deletionTimestamp").and_then(Value::as_str);
    let marked_at = marked_at.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let deadline = match (marked_at, pending) {
        (Some(at), Some(pending)) => {
            at.with_timezone(&Utc) - chrono::Duration::seconds(pending - grace)
        }
        _ => Utc::now() + chrono::Duration::seconds(grace),
    };
    let deadline = deadline.to_rfc3339_opts(SecondsFormat::Secs, true);
    meta.insert("deletionTimestamp".into(), json!(deadline));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    true
}

/// True when an update would change nothing but the resourceVersion.
fn unchanged(current: &Value, next: &Value) -> bool {
    let (Some(a), Some(b)) = (current.as_object(), next.as_object()) else {
        return current == next;
    };
    fn metadata_without_rv(o: &Map<String, Value>) -> BTreeMap<&String, &Value> {
        let meta = o.get("metadata").and_then(Value::as_object);
        meta.into_iter().flatten().filter(|(k, _)| *k != "resourceVersion").collect()
    }
    a.len() == b.len()
        && a.iter().all(|(k, v)| k == "metadata" || b.get(k) == Some(v))
        && metadata_without_rv(a) == metadata_without_rv(b)
}

/// Checks the body is an object of `resource`'s kind and fills a missing kind and apiVersion.
/// A request body as the object its URL names: `kind` and `apiVersion` filled in or checked
/// against the URL, and the namespace too (400 when they differ), as every write's body is.
/// For what is answered without being stored (the reviews).
pub fn addressed_object(
    resource: &'static ResourceType,
    namespace: &str,
    body: Value,
) -> Result<Value, ApiError> {
    let mut object = typed_object(resource, body)?;
    set_namespace(resource, namespace, metadata(&mut object)?)?;
    Ok(object)
}

fn typed_object(resource: &'static ResourceType, body: Value) -> Result<Value, ApiError> {
    let mut map = match body {
        Value::Object(map) => map,
        // Decoded into the URL's type, `null` is its zero: an object with nothing set.
        Value::Null => serde_json::Map::new(),
        _ => return Err(ApiError::BadRequest("the request body must be a JSON object".into())),
    };
    let api_version = resource.api_version();
    match map.get("kind") {
        None => {}
        Some(Value::String(k)) if k == resource.kind => {}
        Some(Value::String(k)) if k.is_empty() => {}
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "the kind of the object ({}) does not match the kind of the URL ({})",
                other.as_str().unwrap_or(&other.to_string()),
                resource.kind
            )))
        }
    }
    match map.get("apiVersion") {
        None => {}
        Some(Value::String(v)) if *v == api_version || v.is_empty() => {}
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "the API version of the object ({}) does not match the URL ({api_version})",
                other.as_str().unwrap_or(&other.to_string())
            )))
        }
    }
    // kind and apiVersion first, as Kubernetes writes them.
    let mut ordered = Map::with_capacity(map.len() + 2);
    ordered.insert("kind".into(), json!(resource.kind));
    ordered.insert("apiVersion".into(), json!(api_version));
    map.remove("kind");
    map.remove("apiVersion");
    ordered.extend(map);
    Ok(Value::Object(ordered))
}

fn metadata(object: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let map = object.as_object_mut().expect("typed_object returns an object");
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut().ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))
}

/// A create's refusal of a body naming another namespace than its URL (Kubernetes'
/// `EnsureObjectNamespaceMatchesRequestNamespace`).
const NAMESPACE_MISMATCH: &str =
    "the namespace of the provided object does not match the namespace sent on the request";

fn set_namespace(
    resource: &ResourceType,
    namespace: &str,
    meta: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    if names_another_namespace(resource, meta, namespace) {
        return Err(ApiError::BadRequest(NAMESPACE_MISMATCH.into()));
    }
    if resource.namespaced {
        meta.insert("namespace".into(), json!(namespace));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

/// Does the metadata of an object of a namespaced kind name a namespace other than the URL's?
/// (A cluster-scoped object's is dropped.)
fn names_another_namespace(
    resource: &ResourceType,
    meta: &Map<String, Value>,
    namespace: &str,
) -> bool {
    let named = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    resource.namespaced && !named.is_empty() && named != namespace
}

/// A delete's preconditions against the object, with Kubernetes' words for a delete (its
/// `BeforeDelete`): the uid first, then the resourceVersion, compared as text (one that is
/// not a number matches nothing: 409). (The store checks them again as it writes.)
fn check_delete_preconditions(
    resource: &'static ResourceType,
    current: &StoredObject,
    uid: Option<&str>,
    resource_version: Option<&str>,
) -> Result<(), ApiError> {
    let conflict = |message: String| ApiError::Conflict {
        resource: resource.kind,
        group: resource.group,
        name: current.key.name.clone(),
        message: format!(
            "Operation cannot be fulfilled on {} {:?}: {message}",
            error::qualified(resource.kind, resource.group),
            current.key.name
        ),
    };
    if resource.plural == "namespaces" {
        // The namespace storage checks them itself, in words of its own.
        let conflict =
            |field: &str, asked: &str, held: &dyn std::fmt::Display| ApiError::Conflict {
                resource: "namespaces",
                group: "",
                name: current.key.name.clone(),
                message: format!(
                    "Operation cannot be fulfilled on namespaces {:?}: Precondition failed: \
                     {field} in precondition: {asked}, {field} in object meta: {held}",
                    current.key.name
                ),
            };
        if let Some(uid) = uid.filter(|uid| *uid != current.uid) {
            return Err(conflict("UID", uid, &current.uid));
        }
        return match resource_version {
            Some(rv) if rv != current.resource_version.to_string() => {
                Err(conflict("ResourceVersion", rv, &current.resource_version))
            }
            _ => Ok(()),
        };
    }
    if let Some(uid) = uid.filter(|uid| *uid != current.uid) {
        return Err(conflict(format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The \
             object might have been deleted and then recreated",
            current.uid
        )));
    }
    match resource_version {
        Some(rv) if rv != current.resource_version.to_string() => Err(conflict(format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion \
             in record ({}). The object might have been modified",
            current.resource_version
        ))),
        _ => Ok(()),
    }
}

/// An update's check of the names its body gives against the URL's, as Kubernetes' update
/// handler checks them before anything else: a namespace, if given, must be the URL's (for a
/// namespaced kind; `EnsureObjectNamespaceMatchesRequestNamespace`), then the name must be
/// there and be the URL's (`checkName`).
fn check_names(
    resource: &ResourceType,
    meta: &Map<String, Value>,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    if names_another_namespace(resource, meta, namespace) {
        return Err(ApiError::BadRequest(NAMESPACE_MISMATCH.into()));
    }
    match meta.get("name").and_then(Value::as_str).unwrap_or("") {
        "" => Err(ApiError::BadRequest(format!(
            "the name of the object ({name} based on URL) was undeterminable: name must be \
             provided"
        ))),
        n if n != name => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// The checks of a subresource created under its object's name (`pods/binding`,
/// `pods/eviction`) on the names its body gives: a namespace, if given, must be the URL's (as
/// Kubernetes' create handler checks it), then the name must be the URL's object's, a missing
/// name being another name (as their Kubernetes storage checks it, first).
fn check_subresource_names(
    body: &Value,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let meta = body.get("metadata").and_then(Value::as_object);
    if meta.is_some_and(|meta| names_another_namespace(resources::core("pods"), meta, namespace)) {
        return Err(ApiError::BadRequest(NAMESPACE_MISMATCH.into()));
    }
    match json::at(body, "/metadata/name").and_then(Value::as_str) {
        Some(named) if named == name => Ok(()),
        _ => Err(ApiError::BadRequest(format!("name in URL does not match name in {kind} object"))),
    }
}

/// Fills the object's name from the URL, or checks that it is the URL's.
fn set_name(meta: &mut Map<String, Value>, name: &str) -> Result<(), ApiError> {
    match meta.get("name").and_then(Value::as_str) {
        Some(n) if n == name => Ok(()),
        None | Some("") => {
            meta.insert("name".into(), json!(name));
            Ok(())
        }
        Some(n) => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
    }
}

/// The resourceVersion an object body names (a precondition), if any.
fn requested_revision(meta: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    match meta.get("resourceVersion").and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(rv) => parse_rv(rv).map(Some),
    }
}

/// Parses a resourceVersion as the client sent it: digits only, as Go's `ParseUint` reads it
/// (Rust's would take a leading `+`).
pub fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    let invalid = || ApiError::BadRequest(format!("invalid resource version: {rv:?}"));
    if rv.starts_with('+') {
        return Err(invalid());
    }
    rv.parse().map_err(|_| invalid())
}

/// A field selector given to a view (events.k8s.io's `regarding.name`), checked against the
/// view's fields and written in its storage's (`involvedObject.name`), as Kubernetes' field
/// label conversions turn a version's labels into the stored type's.
fn view_field_selector(view: View, selector: &Option<String>) -> Result<Option<String>, ApiError> {
    let Some(selector) = selector else { return Ok(None) };
    let fields = filter(view.view, None, &None, &Some(selector.clone()))?.fields;
    Ok(Some(fields.to_string()))
}

/// What is wrong with a list's combination of options, every problem, as Kubernetes'
/// `ValidateListOptions` lists them (a list's `sendInitialEvents` is the caller's to add).
pub fn list_option_problems(options: &ListOptions) -> Vec<FieldError> {
    let rv = options.resource_version.as_deref();
    let mut causes = Vec::new();
    let forbidden = |m: &str| FieldError::forbidden("resourceVersionMatch", m);
    // Every problem of the combination, as Kubernetes' `ValidateListOptions` lists them.
    if let Some(matching) = options.resource_version_match.as_deref() {
        if rv.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if options.continue_token.is_some() {
            causes.push(forbidden("resourceVersionMatch is forbidden when continue is provided"));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            let supported = ["Exact", "NotOlderThan", ""];
            causes.push(FieldError::not_supported("resourceVersionMatch", matching, &supported));
        }
        if matching == "Exact" && rv == Some("0") {
            causes.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    causes
}

/// The objects a list's options select, for a list answered from elsewhere than the store.
pub fn list_filter(
    resource: &'static ResourceType,
    namespace: Option<&str>,
    options: &ListOptions,
) -> Result<ObjectFilter, ApiError> {
    filter(resource, namespace, &options.label_selector, &options.field_selector)
}

fn filter(
    resource: &'static ResourceType,
    namespace: Option<&str>,
    label_selector: &Option<String>,
    field_selector: &Option<String>,
) -> Result<ObjectFilter, ApiError> {
    let labels = match label_selector {
        Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))?,
        None => LabelSelector::default(),
    };
    let fields = match field_selector {
        Some(s) => FieldSelector::parse(s, resource).map_err(|e| {
            ApiError::BadRequest(match e {
                // Kubernetes' words for the kinds without field labels of their own.
                SelectorError::UnsupportedField(field) if resource.selectable_fields.is_empty() => {
                    format!(
                        "{field:?} is not a known field selector: only \"metadata.name\", \
                         \"metadata.namespace\""
                    )
                }
                e => e.to_string(),
            })
        })?,
        None => FieldSelector::default(),
    };
    let namespace =
        namespace.filter(|ns| resource.namespaced && !ns.is_empty()).map(str::to_string);
    Ok(ObjectFilter { namespace, labels, fields })
}

/// A random (version 4) UUID, from the thread's CSPRNG rather than a `getrandom` system call
/// per object.
pub(crate) fn new_uid() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

/// A patched object that does not decode as its kind (a value of the wrong type; an unknown
/// field under `fieldValidation=Strict`): 422 naming no kind or object, the field `patch`
/// invalid, as Kubernetes' patch handler answers. Its value is the patched object for a JSON
/// or merge patch, and the patch itself, printed as Go prints the map, for a strategic one.
pub(crate) fn patch_not_decodable(
    patch_type: PatchType,
    patch: &Value,
    patched: &Value,
    decoding: String,
) -> ApiError {
    let value = match patch_type {
        PatchType::StrategicMerge => crate::model::text::go_print(patch),
        PatchType::Json | PatchType::Merge => patched.to_string(),
    };
    let cause = FieldError::invalid("patch", &value, decoding);
    ApiError::Invalid { kind: "", group: "", name: String::new(), causes: vec![cause] }
}

/// A name from `generateName`: the prefix, cut to 58 bytes so that the name fits 63, and five
/// random characters, as Kubernetes' name generator makes them.
pub(crate) fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const SUFFIX: usize = 5;
    let mut rng = rand::thread_rng();
    let suffix = (0..SUFFIX).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char);
    crate::model::text::prefix_within(prefix, 63 - SUFFIX).chars().chain(suffix).collect()
}

/// A continue token, as Kubernetes' looks (`rv` -1 for [`ContinuePoint::LATEST`]).
fn encode_continue(point: &ContinuePoint) -> String {
    let revision = match point.revision {
        ContinuePoint::LATEST => json!(-1),
        revision => json!(revision),
    };
    let mut token = json!({"v": "meta.k8s.io/v1", "rv": revision,
        "start": [point.after.0, point.after.1]});
    if let Some(remaining) = point.remaining {
        token["remaining"] = json!(remaining);
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<ContinuePoint, ApiError> {
    let bad = |why: &str| {
        let message = format!("invalid continue token: continue key is not valid: {why}");
        ApiError::BadRequest(message)
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => token.len(),
        };
        bad(&format!("illegal base64 data at input byte {at}"))
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        // Go's words for the commonest: what cannot begin a value.
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
        match first {
            Some(c) if !b"{[\"-0123456789tfn".contains(&c) => bad(&format!(
                "invalid character '{}' looking for beginning of value",
                char::from(c)
            )),
            _ => bad(&e.to_string()),
        }
    })?;
    let version = value.get("v").and_then(Value::as_str).unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(bad(&format!("server does not recognize this encoded version {version}")));
    }
    let revision = match value.get("rv").and_then(Value::as_i64) {
        Some(-1) => ContinuePoint::LATEST,
        Some(revision) if revision > 0 => revision as u64,
        _ => return Err(bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")),
    };
    let empty = || bad("encoded start key empty (version meta.k8s.io/v1)");
    let start = value.get("start").and_then(Value::as_array).ok_or_else(empty)?;
    let remaining = match value.get("remaining") {
        None => None,
        Some(count) => Some(count.as_u64().ok_or_else(|| bad("remaining count"))? as usize),
    };
    match start.as_slice() {
        [Value::String(ns), Value::String(name)] => {
            Ok(ContinuePoint { revision, after: (ns.clone(), name.clone()), remaining })
        }
        _ => Err(empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let point =
            ContinuePoint { revision: 9, after: ("ns".into(), "p".into()), remaining: None };
        assert_eq!(decode_continue(&encode_continue(&point)).unwrap(), point);
        let counted = ContinuePoint { remaining: Some(12), ..point.clone() };
        assert_eq!(decode_continue(&encode_continue(&counted)).unwrap(), counted);
        let latest = ContinuePoint { revision: ContinuePoint::LATEST, ..point.clone() };
        let token = encode_continue(&latest);
        assert!(String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&token).unwrap()
        )
        .unwrap()
        .contains("\"rv\":-1"));
        assert_eq!(decode_continue(&token).unwrap(), latest);
        assert!(decode_continue("%%%").is_err());
        assert!(decode_continue("e30").is_err());
    }

    #[test]
    fn generated_names_fit_in_63_characters() {
        let short = generated_name("web-");
        assert!(short.starts_with("web-") && short.len() == 9, "{short}");
        // `a` is not among the random characters: the prefix is exactly the first 58.
        let long = generated_name(&"a".repeat(70));
        assert_eq!(long.len(), 63);
        assert!(long.starts_with(&"a".repeat(58)) && !long[58..].contains('a'), "{long}");
        let wide = generated_name(&"é".repeat(40));
        assert!(wide.len() <= 63 && wide.starts_with(&"é".repeat(29)), "{wide}");
    }

    #[test]
    fn uids_are_version_4_uuids() {
        let uid = new_uid();
        let parsed = uuid::Uuid::parse_str(&uid).unwrap();
        assert_eq!(parsed.get_version(), Some(uuid::Version::Random));
        assert_eq!(uid.len(), 36);
        assert_ne!(uid, new_uid());
    }

    #[test]
    fn typed_object_fills_and_checks_kind() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let filled = typed_object(pods, json!({"metadata":{"name":"p"}})).unwrap();
        assert_eq!(
            (filled["kind"].as_str(), filled["apiVersion"].as_str()),
            (Some("Pod"), Some("v1"))
        );
        assert!(matches!(
            typed_object(pods, json!({"kind":"Service"})),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(typed_object(pods, json!([1])), Err(ApiError::BadRequest(_))));
    }

    #[test]
    fn main_update_keeps_status_and_generation() {
        let pods = resources::find("", "v1", "pods").unwrap();
        let current = json!({"metadata":{"name":"p","uid":"u","generation":1},"spec":{"a":1},"status":{"phase":"Running"}});
        let body =
            json!({"metadata":{"name":"p","uid":"x"},"spec":{"a":2},"status":{"phase":"Failed"}});
        let next = merge_for_update(pods, &current, body, Part::Main);
        assert_eq!(next["status"]["phase"], "Running");
        assert_eq!(next["metadata"]["uid"], "u");
        assert_eq!(next["metadata"]["generation"], 1, "a pod's spec does not count in it");
        let status = json!({"metadata":{"name":"p"},"spec":{"a":3},"status":{"phase":"Failed"}});
        let next = merge_for_update(pods, &current, status, Part::Status);
        assert_eq!(next["spec"]["a"], 1);
        assert_eq!(next["status"]["phase"], "Failed");
    }

    /// A namespace's status written without a phase (or an empty one) is Active, as
    /// Kubernetes decodes it; a deleted one's must say Terminating.
    #[actix::test]
    async fn a_namespace_status_without_a_phase_is_active() {
        let core = crate::testing::core().await;
        let namespaces = resources::core("namespaces");
        let ns = json!({"metadata": {"name": "n"}});
        core.create(namespaces, "", ns, &WriteOptions::default()).await.unwrap();
        for status in [json!({"phase": ""}), json!(null)] {
            let body = json!({"metadata": {"name": "n"}, "status": status});
            let written = core
                .update_status(namespaces, "", "n", body, &WriteOptions::default())
                .await
                .unwrap();
            assert_eq!(written.to_value()["status"]["phase"], "Active");
        }
    }

    /// Endpoints are stored repacked, whoever writes them (Kubernetes' `Canonicalize`): by
    /// create and by update alike.
    #[actix::test]
    async fn endpoints_are_stored_repacked() {
        let core = crate::testing::core().await;
        let endpoints = resources::core("endpoints");
        let address = |ip: &str| json!({"ip": ip});
        let port = json!({"port": 80});
        let body = json!({"metadata": {"name": "e"}, "subsets": [
            {"addresses": [address("10.0.0.2")], "ports": [port]},
            {"addresses": [address("10.0.0.1")], "ports": [port]}]});
        let created = core.create(endpoints, "default", body, &WriteOptions::default()).await;
        let created = created.unwrap().to_value();
        let expected = json!([{"addresses": [address("10.0.0.1"), address("10.0.0.2")],
            "ports": [{"port": 80, "protocol": "TCP"}]}]);
        assert_eq!(created["subsets"], expected);
        let mut body = created.clone();
        body["subsets"] = json!([{"addresses": [address("10.0.0.3")], "ports": [port]},
            {"notReadyAddresses": [address("10.0.0.3")], "ports": [port]}]);
        let updated = core.update(endpoints, "default", "e", body, &WriteOptions::default()).await;
        let expected = json!([{"notReadyAddresses": [address("10.0.0.3")],
            "ports": [{"port": 80, "protocol": "TCP"}]}]);
        assert_eq!(updated.unwrap().to_value()["subsets"], expected, "not ready wins");
    }

    /// A list of the latest state is at the latest revision handed out, whatever resource
    /// took it (not at its own resource's last write), as Kubernetes' lists are.
    #[actix::test]
    async fn a_list_is_at_the_latest_revision() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"c"}});
        core.create(cms, "default", cm, &WriteOptions::default()).await.unwrap();
        // Writes to other resources, some of them on other shards.
        for plural in ["secrets", "endpoints", "serviceaccounts", "limitranges", "resourcequotas"] {
            let Some(other) = resources::find("", "v1", plural) else { continue };
            let object = json!({"metadata":{"name":"o"}});
            let later =
                core.create(other, "default", object, &WriteOptions::default()).await.unwrap();
            let list = core.list(cms, Some("default"), &ListOptions::default()).await.unwrap();
            assert!(list.resource_version >= later.resource_version, "after a write to {plural}");
            let asked = Some(later.resource_version.to_string());
            let at = ListOptions { resource_version: asked, ..ListOptions::default() };
            let list = core.list(cms, Some("default"), &at).await.unwrap();
            assert!(list.resource_version >= later.resource_version, "not older than asked");
        }
    }

    #[actix::test]
    async fn a_dry_run_create_answers_the_object_with_its_managed_fields_and_stores_nothing() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"c"},"data":{"a":"1"}});
        let options = WriteOptions { dry_run: true, ..WriteOptions::default() };
        let answered = core.create(cms, "default", cm, &options).await.unwrap().to_value();
        let entries = &answered["metadata"]["managedFields"];
        assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}), "{answered}");
        assert_eq!(entries[0]["operation"], "Update");
        let key = ObjectKey::new(cms, "default", "c");
        assert!(core.store.get(&key).await.unwrap().is_none());
    }

    #[actix::test]
    async fn a_dry_run_delete_answers_the_object_as_the_delete_would_mark_it_and_writes_nothing() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}]}});
        let created = core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let options = DeleteOptions { dry_run: true, ..DeleteOptions::default() };
        let answered = core.delete(pods, "default", "p", &options).await.unwrap().to_value();
        assert!(answered["metadata"]["deletionTimestamp"].is_string(), "{answered}");
        assert_eq!(answered["metadata"]["deletionGracePeriodSeconds"], 30);
        let foreground = DeleteOptions {
            dry_run: true,
            propagation_policy: Some("Foreground".into()),
            ..DeleteOptions::default()
        };
        let answered = core.delete(pods, "default", "p", &foreground).await.unwrap().to_value();
        assert_eq!(answered["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        let key = ObjectKey::new(pods, "default", "p");
        let stored = core.store.get(&key).await.unwrap().unwrap();
        assert_eq!(stored.resource_version, created.resource_version, "nothing written");
        assert!(!stored.deleting);
    }

    #[actix::test]
    async fn a_delete_that_marks_its_object_is_retried_over_concurrent_writes() {
        let core = crate::testing::core().await;
        let rcs = resources::find("", "v1", "replicationcontrollers").unwrap();
        let names: Vec<String> = (0..20).map(|i| format!("busy-{i}")).collect();
        let mut writers = Vec::new();
        for name in &names {
            let rc = json!({"metadata": {"name": name}, "spec": {"replicas": 0,
                "selector": {"a": "b"}, "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
            core.create(rcs, "default", rc, &WriteOptions::default()).await.unwrap();
            // Controllers write each one's status over and over, as the replication manager
            // does, until it is gone.
            for _ in 0..3 {
                let (writer, name) = (core.clone(), name.clone());
                writers.push(tokio::spawn(async move {
                    for i in 0.. {
                        let status = json!({"status": {"replicas": 0, "observedGeneration": i}});
                        let options = WriteOptions::default();
                        let patch = PatchType::Merge;
                        let patched =
                            writer.patch(rcs, "default", &name, patch, &status, true, &options);
                        if patched.await.is_err() {
                            break; // gone
                        }
                    }
                }));
            }
        }
        tokio::task::yield_now().await;
        // The API default for a replication controller orphans: each delete writes a finalizer
        // over the status writes racing it.
        let options = DeleteOptions::default();
        let deletes = names.iter().map(|name| core.delete(rcs, "default", name, &options));
        for deleted in futures::future::join_all(deletes).await {
            assert!(deleted.is_ok(), "{deleted:?}");
        }
        for name in &names {
            let key = ObjectKey::new(rcs, "default", name);
            let gone = core.store.get(&key).await.unwrap();
            // Marked (the orphan finalizer waits for a collector this test does not run).
            assert!(gone.is_some_and(|rc| rc.deleting), "{name}");
        }
        writers.into_iter().for_each(|w| w.abort());
    }

    /// A uid a patch names is no precondition (the controllers' adoption patches name it): a
    /// racing write makes the patch apply again, not fail; a uid of another object is 422.
    #[actix::test]
    async fn a_patch_naming_its_object_s_uid_is_retried_over_concurrent_writes() {
        let core = crate::testing::core().await;
        let maps = resources::core("configmaps");
        let map = json!({"metadata": {"name": "busy"}});
        let made = core.create(maps, "default", map, &WriteOptions::default()).await.unwrap();
        let uid = json!(made.uid);
        let patches = (0..40).map(|i| {
            let (core, uid) = (core.clone(), uid.clone());
            let named = i % 2 == 0;
            tokio::spawn(async move {
                let mut patch = json!({"metadata": {"labels": {format!("l{i}"): "x"}}});
                if named {
                    patch["metadata"]["uid"] = uid;
                }
                let options = WriteOptions::default();
                let patched = core.patch(
                    maps,
                    "default",
                    "busy",
                    PatchType::StrategicMerge,
                    &patch,
                    false,
                    &options,
                );
                patched.await
            })
        });
        for patched in futures::future::join_all(patches).await {
            let patched = patched.unwrap();
            assert!(patched.is_ok(), "{patched:?}");
        }
        let key = ObjectKey::new(maps, "default", "busy");
        let stored = core.store.get(&key).await.unwrap().unwrap();
        assert_eq!(stored.to_value()["metadata"]["labels"].as_object().unwrap().len(), 40);
        let other = json!({"metadata": {"uid": new_uid()}});
        let options = WriteOptions::default();
        let refused =
            core.patch(maps, "default", "busy", PatchType::Merge, &other, false, &options);
        assert!(matches!(refused.await, Err(ApiError::Invalid { .. })));
    }

    #[actix::test]
    async fn a_delete_recomputes_the_collectors_finalizers_as_its_policy_says() {
        let core = crate::testing::core().await;
        let maps = resources::core("configmaps");
        let options = WriteOptions::default();
        let policy = |p: &str| DeleteOptions {
            propagation_policy: Some(p.into()),
            ..DeleteOptions::default()
        };
        let finalizers =
            |object: &Arc<StoredObject>| object.to_value()["metadata"]["finalizers"].clone();
        // In the foreground behind a finalizer of its own; then deleted with no policy (it
        // stays in the foreground), then in the background: the collector's finalizer goes.
        let held = json!({"metadata": {"name": "a", "finalizers": ["a.io/keep"]}});
        core.create(maps, "default", held, &options).await.unwrap();
        let marked = core.delete(maps, "default", "a", &policy("Foreground")).await.unwrap();
        assert_eq!(finalizers(&marked), json!(["a.io/keep", FOREGROUND_FINALIZER]));
        let again = core.delete(maps, "default", "a", &DeleteOptions::default()).await.unwrap();
        assert_eq!(again.resource_version, marked.resource_version, "nothing to change");
        let background = core.delete(maps, "default", "a", &policy("Background")).await.unwrap();
        assert_eq!(finalizers(&background), json!(["a.io/keep"]));
        assert!(background.deleting);
        // With no other finalizer, a background delete deletes it at once.
        core.create(maps, "default", json!({"metadata": {"name": "b"}}), &options).await.unwrap();
        core.delete(maps, "default", "b", &policy("Orphan")).await.unwrap();
        core.delete(maps, "default", "b", &policy("Background")).await.unwrap();
        let key = ObjectKey::new(maps, "default", "b");
        assert!(core.store.get(&key).await.unwrap().is_none(), "gone");
        // A replication controller being deleted in the foreground stays so, though its kind
        // orphans by default.
        let rcs = resources::core("replicationcontrollers");
        let rc = json!({"metadata": {"name": "r", "finalizers": ["a.io/keep"]}, "spec": {"replicas": 0,
            "selector": {"a": "b"}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        core.create(rcs, "default", rc, &options).await.unwrap();
        core.delete(rcs, "default", "r", &policy("Foreground")).await.unwrap();
        let again = core.delete(rcs, "default", "r", &DeleteOptions::default()).await.unwrap();
        assert_eq!(finalizers(&again), json!(["a.io/keep", FOREGROUND_FINALIZER]));
        // Events have no dependents: any policy deletes one at once.
        let events = resources::core("events");
        let event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
            "namespace": "default"}, "reason": "R", "message": "m", "type": "Normal"});
        core.create(events, "default", event, &options).await.unwrap();
        core.delete(events, "default", "e", &policy("Foreground")).await.unwrap();
        let key = ObjectKey::new(events, "default", "e");
        assert!(core.store.get(&key).await.unwrap().is_none(), "an event is deleted at once");
    }

    #[actix::test]
    async fn the_update_that_removes_the_last_finalizer_answers_the_updated_object() {
        let core = crate::testing::core().await;
        let maps = resources::core("configmaps");
        let options = WriteOptions::default();
        let held =
            json!({"metadata": {"name": "a", "finalizers": ["a.io/keep"]}, "data": {"k": "v"}});
        core.create(maps, "default", held, &options).await.unwrap();
        let marked = core.delete(maps, "default", "a", &DeleteOptions::default()).await.unwrap();
        let mut released = marked.to_value();
        released["metadata"]["finalizers"] = json!([]);
        let answered = core.update(maps, "default", "a", released, &options).await.unwrap();
        let answered_value = answered.to_value();
        assert!(answered_value["metadata"].get("finalizers").is_none(), "{answered_value}");
        assert_eq!(answered_value["data"]["k"], "v");
        assert_eq!(answered.resource_version, marked.resource_version);
        let key = ObjectKey::new(maps, "default", "a");
        assert!(core.store.get(&key).await.unwrap().is_none(), "gone");
    }

    #[actix::test]
    async fn budgets_and_leases_are_updated_only_at_a_named_version() {
        let core = crate::testing::core().await;
        let options = WriteOptions::default();
        let leases = resources::find("coordination.k8s.io", "v1", "leases").unwrap();
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
        let created = core.create(leases, "default", lease, &options).await.unwrap();
        let mut blind = created.to_value();
        blind["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        blind["spec"]["holderIdentity"] = json!("b");
        let refused = core.update(leases, "default", "l", blind, &options).await;
        let Err(refused @ ApiError::Invalid { .. }) = refused else { panic!("{refused:?}") };
        assert_eq!(
            refused.to_string(),
            "leases.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid \
             value: 0x0: must be specified for an update"
        );
        let mut named = created.to_value();
        named["spec"]["holderIdentity"] = json!("b");
        core.update(leases, "default", "l", named, &options).await.unwrap();
        // A patch applies to the version it read.
        let patch = json!({"spec": {"holderIdentity": "c"}});
        core.patch(leases, "default", "l", PatchType::Merge, &patch, false, &options)
            .await
            .unwrap();
        // Other kinds take an update without one.
        let maps = resources::core("configmaps");
        core.create(maps, "default", json!({"metadata": {"name": "m"}}), &options).await.unwrap();
        let blind = json!({"metadata": {"name": "m"}, "data": {"k": "v"}});
        core.update(maps, "default", "m", blind, &options).await.unwrap();
    }

    #[actix::test]
    async fn a_create_carrying_a_resource_version_is_refused_unless_it_is_zero() {
        let core = crate::testing::core().await;
        let maps = resources::core("configmaps");
        let options = WriteOptions::default();
        let read_back = json!({"metadata": {"name": "a", "resourceVersion": "5"}});
        let refused = core.create(maps, "default", read_back, &options).await;
        assert!(matches!(refused, Err(ApiError::BadRequest(_))), "{refused:?}");
        let zero = json!({"metadata": {"name": "a", "resourceVersion": "0"}});
        let created = core.create(maps, "default", zero, &options).await.unwrap();
        assert_ne!(created.resource_version, 0);
    }

    #[actix::test]
    async fn a_pod_deleted_without_grace_is_marked_before_it_goes() {
        use futures::StreamExt;
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
        let created = core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let from = WatchOptions {
            resource_version: Some(created.resource_version.to_string()),
            ..WatchOptions::default()
        };
        let mut watch = core.watch(pods, Some("default"), &from).await.unwrap();
        core.delete(pods, "default", "p", &DeleteOptions::default()).await.unwrap();
        let now = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
        let deleted = core.delete(pods, "default", "p", &now).await.unwrap().to_value();
        assert_eq!(deleted["metadata"]["deletionGracePeriodSeconds"], 0, "{deleted}");
        let mut seen = Vec::new();
        while seen.len() < 3 {
            if let Some(WatchFrame::Event(kind, object)) = watch.next().await {
                let grace = object.to_value()["metadata"]["deletionGracePeriodSeconds"].clone();
                seen.push((kind.as_str().to_string(), grace));
            }
        }
        let expected = [("MODIFIED", json!(30)), ("MODIFIED", json!(0)), ("DELETED", json!(0))];
        assert_eq!(seen, expected.map(|(kind, grace)| (kind.to_string(), grace)));
        // Marked with 0 already (a finalizer's marking): deleted with no other write.
        let held = json!({"metadata": {"name": "q", "finalizers": ["a.io/keep"]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", held, &WriteOptions::default()).await.unwrap();
        let marked = core.delete(pods, "default", "q", &now).await.unwrap();
        assert!(marked.deleting);
        let again = core.delete(pods, "default", "q", &now).await.unwrap();
        assert_eq!(again.resource_version, marked.resource_version);
    }

    /// A list at any revision is whole (a watch cache's), but events', which Kubernetes reads
    /// from storage, are paged.
    #[actix::test]
    async fn a_list_at_any_revision_is_whole_but_events_page() {
        let core = crate::testing::core().await;
        let options = WriteOptions::default();
        for i in 0..3 {
            let event = json!({"metadata": {"name": format!("e{i}")},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
            core.create(resources::core("events"), "default", event, &options).await.unwrap();
            let cm = json!({"metadata": {"name": format!("c{i}")}});
            core.create(resources::core("configmaps"), "default", cm, &options).await.unwrap();
        }
        let any = ListOptions {
            limit: Some(2),
            resource_version: Some("0".into()),
            ..ListOptions::default()
        };
        let events = core.list(resources::core("events"), Some("default"), &any).await.unwrap();
        assert_eq!(events.items.len(), 2);
        assert!(events.continue_token.is_some());
        let events_v1 = resources::find("events.k8s.io", "v1", "events").unwrap();
        let viewed = core.list(events_v1, Some("default"), &any).await.unwrap();
        assert_eq!((viewed.items.len(), viewed.remaining_item_count), (2, Some(1)));
        let cms = core.list(resources::core("configmaps"), Some("default"), &any).await.unwrap();
        assert_eq!(cms.items.len(), 3);
        assert!(cms.continue_token.is_none());
    }

    /// A continue token that cannot be read is 400 with what is wrong with it, in Kubernetes'
    /// words.
    #[test]
    fn bad_continue_tokens_say_what_is_wrong() {
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let why = |token: &str| match decode_continue(token) {
            Err(ApiError::BadRequest(message)) => message,
            other => panic!("{other:?}"),
        };
        let prefix = "invalid continue token: continue key is not valid: ";
        assert_eq!(why("garbage!"), format!("{prefix}illegal base64 data at input byte 7"));
        assert_eq!(
            why("abc"),
            format!("{prefix}invalid character 'i' looking for beginning of value")
        );
        assert_eq!(
            why(&encode("{}")),
            format!("{prefix}server does not recognize this encoded version ")
        );
        let zero = encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":["a","b"]}"#);
        assert_eq!(
            why(&zero),
            format!("{prefix}incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        );
        let good = encode(r#"{"v":"meta.k8s.io/v1","rv":5,"start":["a","b"]}"#);
        assert!(decode_continue(&good).is_ok());
    }

    /// A full page goes on while keys remain, matching the selector or not, as Kubernetes'
    /// storage says there is more: the next page may be empty.
    #[actix::test]
    async fn a_selected_page_goes_on_while_keys_remain() {
        let core = crate::testing::core().await;
        let cms = resources::core("configmaps");
        for (name, labels) in
            [("c0", json!({"x": "1"})), ("c1", json!({"x": "1"})), ("c2", json!({}))]
        {
            let cm = json!({"metadata": {"name": name, "labels": labels}});
            core.create(cms, "default", cm, &WriteOptions::default()).await.unwrap();
        }
        let selected = |token: Option<String>| ListOptions {
            label_selector: Some("x=1".into()),
            limit: Some(2),
            continue_token: token,
            ..ListOptions::default()
        };
        let first = core.list(cms, Some("default"), &selected(None)).await.unwrap();
        assert_eq!(first.items.len(), 2);
        assert_eq!(first.remaining_item_count, None, "not counted with a selector");
        let rest = core.list(cms, Some("default"), &selected(first.continue_token)).await.unwrap();
        assert!(rest.items.is_empty() && rest.continue_token.is_none());

        // A token of a revision not handed out yet is refused, as a resourceVersion would be.
        let future = ContinuePoint {
            revision: core.current_revision() + 1_000,
            after: ("default".into(), "c0".into()),
            remaining: None,
        };
        let made_up = selected(Some(encode_continue(&future)));
        let refused = core.list(cms, Some("default"), &made_up).await;
        assert!(matches!(refused, Err(ApiError::TooLargeResourceVersion { .. })), "{refused:?}");
    }

    /// A pod being deleted keeps its pending grace period unless a delete gives a shorter one
    /// (its own default is for its first delete only); a negative one is the shortest, 1 s.
    #[actix::test]
    async fn only_a_shorter_grace_period_given_shortens_a_pending_one() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1",
            "terminationGracePeriodSeconds": 15, "containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let grace = |seconds: Option<i64>| DeleteOptions {
            grace_period_seconds: seconds,
            ..DeleteOptions::default()
        };
        let first = core.delete(pods, "default", "p", &grace(Some(100))).await.unwrap();
        assert_eq!(first.to_value()["metadata"]["deletionGracePeriodSeconds"], 100);
        let plain = core.delete(pods, "default", "p", &grace(None)).await.unwrap();
        assert_eq!(plain.resource_version, first.resource_version, "no write");
        let shorter = core.delete(pods, "default", "p", &grace(Some(40))).await.unwrap();
        assert_eq!(shorter.to_value()["metadata"]["deletionGracePeriodSeconds"], 40);
        let longer = core.delete(pods, "default", "p", &grace(Some(60))).await.unwrap();
        assert_eq!(longer.resource_version, shorter.resource_version);
        let negative = core.delete(pods, "default", "p", &grace(Some(-5))).await.unwrap();
        assert_eq!(negative.to_value()["metadata"]["deletionGracePeriodSeconds"], 1);
    }

    #[actix::test]
    async fn a_pod_deleted_orphaning_or_in_the_foreground_keeps_its_grace_period() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1",
            "terminationGracePeriodSeconds": 15, "containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let orphan =
            DeleteOptions { propagation_policy: Some("Orphan".into()), ..DeleteOptions::default() };
        let marked = core.delete(pods, "default", "p", &orphan).await.unwrap().to_value();
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 15, "{marked}");
        assert_eq!(marked["metadata"]["finalizers"], json!([ORPHAN_FINALIZER]));
        // Marked, it takes no other finalizer from a delete.
        let foreground = DeleteOptions {
            propagation_policy: Some("Foreground".into()),
            ..DeleteOptions::default()
        };
        let again = core.delete(pods, "default", "p", &foreground).await.unwrap().to_value();
        assert_eq!(again["metadata"]["finalizers"], json!([ORPHAN_FINALIZER]));
        assert_eq!(again["metadata"]["deletionGracePeriodSeconds"], 15);
        // Unless that delete shortens its grace period: then in the same write.
        let sooner = DeleteOptions { grace_period_seconds: Some(5), ..foreground.clone() };
        let shortened = core.delete(pods, "default", "p", &sooner).await.unwrap().to_value();
        assert_eq!(shortened["metadata"]["finalizers"], json!([FOREGROUND_FINALIZER]));
        assert_eq!(shortened["metadata"]["deletionGracePeriodSeconds"], 5);
        let background = DeleteOptions {
            propagation_policy: Some("Background".into()),
            grace_period_seconds: Some(2),
            ..DeleteOptions::default()
        };
        let stripped = core.delete(pods, "default", "p", &background).await.unwrap().to_value();
        assert_eq!(stripped["metadata"]["finalizers"], json!([]), "{stripped}");
        assert_eq!(stripped["metadata"]["deletionGracePeriodSeconds"], 2);
        // Not bound: no agent to wait for.
        let pod = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let marked = core.delete(pods, "default", "q", &foreground).await.unwrap().to_value();
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0, "{marked}");
        assert_eq!(marked["metadata"]["finalizers"], json!([FOREGROUND_FINALIZER]));
    }

    #[actix::test]
    async fn a_pod_its_agent_removes_between_the_marking_and_the_delete_counts_as_deleted() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
        let created = core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let now = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
        let Ok(PodDeletion::Now(marked)) =
            core.delete_pod_gracefully(&created, created.to_value(), &now).await
        else {
            panic!("a bound pod deleted with no grace is marked for deletion now");
        };
        // Its node agent saw the marking, stopped the pod and removed it first.
        let uid = created.to_value()["metadata"]["uid"].as_str().unwrap().to_string();
        let agent = DeleteOptions { precondition_uid: Some(uid), ..now.clone() };
        core.delete(pods, "default", "p", &agent).await.unwrap();
        let gone = core.delete_marked_pod(marked, Preconditions::default(), Some(0), false).await;
        let deleted = gone.expect("deleted, not missing").to_value();
        assert_eq!(deleted["metadata"]["deletionGracePeriodSeconds"], 0, "{deleted}");
    }

    #[actix::test]
    async fn a_pod_being_deleted_takes_no_new_finalizers_and_a_negative_grace_is_one_second() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "finalizers": ["a.io/keep"]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let options = DeleteOptions { grace_period_seconds: Some(-5), ..DeleteOptions::default() };
        let marked = core.delete(pods, "default", "p", &options).await.unwrap();
        let marked = marked.to_value();
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 1, "{marked}");
        // So is a negative one in its spec.
        let pod = json!({"metadata": {"name": "r"}, "spec": {"nodeName": "n1",
            "terminationGracePeriodSeconds": -5, "containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let marked_r = core.delete(pods, "default", "r", &DeleteOptions::default()).await.unwrap();
        assert_eq!(marked_r.to_value()["metadata"]["deletionGracePeriodSeconds"], 1);
        // A grace period past any timestamp is a century, not a panic or a year 33715.
        let long =
            DeleteOptions { grace_period_seconds: Some(i64::MAX), ..DeleteOptions::default() };
        let pod = json!({"metadata": {"name": "q"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
        core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let waiting = core.delete(pods, "default", "q", &long).await.unwrap().to_value();
        let deadline = waiting["metadata"]["deletionTimestamp"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(deadline).is_ok(), "{deadline}");
        let mut more = marked.clone();
        more["metadata"]["finalizers"] = json!(["a.io/keep", "b.io/more"]);
        let refused = core.update(pods, "default", "p", more, &WriteOptions::default()).await;
        let Err(ApiError::Invalid { causes, .. }) = refused else { panic!("{refused:?}") };
        assert_eq!(causes[0].field, "metadata.finalizers");
        let mut fewer = marked;
        fewer["metadata"]["finalizers"] = json!([]);
        core.update(pods, "default", "p", fewer, &WriteOptions::default()).await.unwrap();
    }

    #[actix::test]
    async fn a_pod_in_its_grace_period_stays_through_updates_until_deleted_with_no_grace() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let options = WriteOptions::default();
        let graceful = DeleteOptions { grace_period_seconds: Some(30), ..DeleteOptions::default() };
        for (name, finalizers) in [("p", json!([])), ("q", json!(["a.io/keep"]))] {
            let pod = json!({"metadata": {"name": name, "finalizers": finalizers},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
            core.create(pods, "default", pod, &options).await.unwrap();
            core.delete(pods, "default", name, &graceful).await.unwrap();
        }
        // A shorter grace period moves the deadline back by the difference, as BeforeDelete.
        let deadline = |pod: &Value| {
            let at = pod["metadata"]["deletionTimestamp"].as_str().unwrap();
            chrono::DateTime::parse_from_rfc3339(at).unwrap()
        };
        let before = core.get(pods, "default", "p").await.unwrap().to_value();
        let sooner = DeleteOptions { grace_period_seconds: Some(10), ..DeleteOptions::default() };
        let after = core.delete(pods, "default", "p", &sooner).await.unwrap().to_value();
        assert_eq!(after["metadata"]["deletionGracePeriodSeconds"], 10);
        assert_eq!((deadline(&before) - deadline(&after)).num_seconds(), 20);
        // Its node reports how its containers ended: the pod stays, with that status.
        let failed = json!({"status": {"phase": "Failed"}});
        core.patch(pods, "default", "p", PatchType::Merge, &failed, true, &options).await.unwrap();
        let p = core.get(pods, "default", "p").await.unwrap().to_value();
        assert_eq!(p["status"]["phase"], "Failed");
        // A finalizer holds a pod past its node's delete with no grace, which the update that
        // removes the finalizer then completes.
        let now = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
        let marked = core.delete(pods, "default", "q", &now).await.unwrap().to_value();
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0, "{marked}");
        let released = json!({"metadata": {"finalizers": null}});
        core.patch(pods, "default", "q", PatchType::Merge, &released, false, &options)
            .await
            .unwrap();
        assert!(matches!(core.get(pods, "default", "q").await, Err(ApiError::NotFound { .. })));
    }

    #[actix::test]
    async fn a_name_held_by_an_object_being_deleted_says_so() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let held = json!({"metadata": {"name": "f", "finalizers": ["a.io/keep"]}});
        let options = WriteOptions::default();
        core.create(cms, "default", held.clone(), &options).await.unwrap();
        let taken = core.create(cms, "default", held.clone(), &options).await.unwrap_err();
        assert_eq!(taken.to_string(), "configmaps \"f\" already exists");
        core.delete(cms, "default", "f", &DeleteOptions::default()).await.unwrap();
        let taken = core.create(cms, "default", held, &options).await.unwrap_err();
        assert_eq!(taken.to_string(), "object is being deleted: configmaps \"f\" already exists");
    }

    #[actix::test]
    async fn a_core_status_write_changes_labels_but_not_a_pods_owners() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let created = core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        let mut written = created.to_value();
        written["metadata"]["labels"] = json!({"seen": "yes"});
        written["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node",
            "name": "n", "uid": "u"}]);
        written["status"] = json!({"phase": "Running"});
        let options = WriteOptions::default();
        let stored = core.update_status(pods, "default", "p", written, &options).await.unwrap();
        let stored = stored.to_value();
        assert_eq!(stored["metadata"]["labels"], json!({"seen": "yes"}), "{stored}");
        assert!(stored["metadata"].get("ownerReferences").is_none(), "{stored}");
        assert_eq!(stored["status"]["phase"], "Running");
    }

    #[actix::test]
    async fn only_replication_controllers_count_spec_changes_in_their_generation() {
        let core = crate::testing::core().await;
        let (cms, rcs) = (
            resources::find("", "v1", "configmaps").unwrap(),
            resources::find("", "v1", "replicationcontrollers").unwrap(),
        );
        let options = WriteOptions::default();
        let cm = core.create(cms, "default", json!({"metadata":{"name":"c"}}), &options).await;
        assert_eq!(cm.unwrap().to_value()["metadata"].get("generation"), None);
        // A kind that does not track it keeps what a client sent, uncounted.
        let services = resources::find("", "v1", "services").unwrap();
        let svc = json!({"metadata":{"name":"s","generation":1},"spec":{"ports":[{"port":80}]}});
        let svc = core.create(services, "default", svc, &options).await.unwrap().to_value();
        assert_eq!(svc["metadata"]["generation"], 1);
        let mut changed = svc.clone();
        changed["spec"]["ports"][0]["port"] = json!(81);
        let changed = core.update(services, "default", "s", changed, &options).await.unwrap();
        assert_eq!(changed.to_value()["metadata"]["generation"], 1, "{}", changed.to_value());

        let template = json!({"metadata":{"labels":{"app":"a"}},
            "spec":{"containers":[{"name":"c","image":"i"}]}});
        let rc = json!({"metadata":{"name":"r","finalizers":["example.com/hold"]},
            "spec":{"replicas":1,"selector":{"app":"a"},"template":template}});
        let created = core.create(rcs, "default", rc.clone(), &options).await.unwrap();
        assert_eq!(created.to_value()["metadata"]["generation"], 1);
        let mut changed = created.to_value();
        changed["spec"]["replicas"] = json!(2);
        let changed = core.update(rcs, "default", "r", changed, &options).await.unwrap();
        assert_eq!(changed.to_value()["metadata"]["generation"], 2);
        // The same spec sent again without what defaulting filled in is no change.
        let mut resent = changed.to_value();
        let container = &mut resent["spec"]["template"]["spec"]["containers"][0];
        container.as_object_mut().unwrap().remove("imagePullPolicy");
        let resent = core.update(rcs, "default", "r", resent, &options).await.unwrap();
        assert_eq!(resent.to_value()["metadata"]["generation"], 2, "{}", resent.to_value());
        let mut labelled = changed.to_value();
        labelled["metadata"]["labels"] = json!({"x":"y"});
        let labelled = core.update(rcs, "default", "r", labelled, &options).await.unwrap();
        assert_eq!(labelled.to_value()["metadata"]["generation"], 2, "metadata is not spec");
        let delete = DeleteOptions::default();
        let marked = core.delete(rcs, "default", "r", &delete).await.unwrap().to_value();
        assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
        assert_eq!(marked["metadata"]["generation"], 3, "the first marking counts");
        let again = core.delete(rcs, "default", "r", &delete).await.unwrap().to_value();
        assert_eq!(again["metadata"]["generation"], 3, "a second delete does not");
    }

    #[actix::test]
    async fn an_object_stored_before_a_default_was_added_can_still_be_updated() {
        let core = crate::testing::core().await;
        let pods = resources::find("", "v1", "pods").unwrap();
        let options = WriteOptions::default();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": "i", "readinessProbe": {"httpGet": {"port": 80}}}]}});
        let created = core.create(pods, "default", pod, &options).await.unwrap().to_value();
        // As an older build stored it: the probe without the defaults added since.
        let mut older = created.clone();
        older["spec"]["containers"][0]["readinessProbe"] = json!({"httpGet": {"port": 80}});
        let key = ObjectKey::new(pods, "default", "p");
        let unconditional = Preconditions { resource_version: None, uid: None };
        core.store.update(key, older.clone(), unconditional).await.unwrap();
        // A label change sends the spec back as it was read: no change to an immutable spec.
        let mut labelled = older;
        labelled["metadata"]["labels"] = json!({"a": "b"});
        labelled["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        let updated = core.update(pods, "default", "p", labelled, &options).await.unwrap();
        assert_eq!(updated.to_value()["metadata"]["labels"], json!({"a": "b"}));
    }

    #[actix::test]
    async fn an_object_stored_before_its_quantities_were_canonical_can_still_be_updated() {
        // The schema check writes quantities back canonical, as the HTTP edge's does.
        let check: SchemaCheck = Arc::new(|_, _, pod: &mut Value| {
            let cpu = pod.pointer_mut("/spec/containers/0/resources/requests/cpu");
            if let Some(Value::String(cpu)) = cpu {
                *cpu = crate::model::quantity::canonical(cpu)
                    .map_err(|e| e.to_string())?
                    .unwrap_or_else(|| cpu.clone());
            }
            Ok(Vec::new())
        });
        let core = crate::testing::core().await.with_schema_check(check);
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"requests": {"cpu": "1000m"}}}]}});
        let created = core.create(pods, "default", pod, &WriteOptions::default()).await.unwrap();
        // As an older build stored it: the quantity as it was sent.
        let mut older = created.to_value();
        older["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1000m");
        let key = ObjectKey::new(pods, "default", "p");
        let unconditional = Preconditions { resource_version: None, uid: None };
        core.store.update(key, older, unconditional).await.unwrap();
        // A label patch leaves the spec as it was stored: no change to an immutable spec.
        let labels = json!({"metadata": {"labels": {"a": "b"}}});
        let options = WriteOptions::default();
        let patched = core.patch(pods, "default", "p", PatchType::Merge, &labels, false, &options);
        let patched = patched.await.unwrap().to_value();
        assert_eq!(patched["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(patched["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1");
    }

    #[actix::test]
    async fn a_put_creates_only_the_kinds_kubernetes_lets_an_update_create() {
        let core = crate::testing::core().await;
        let options = WriteOptions::default();
        let leases = resources::find("coordination.k8s.io", "v1", "leases").unwrap();
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
        let (created, was_created) =
            core.put(leases, "default", "l", lease.clone(), &options).await.unwrap();
        assert!(was_created);
        let created = created.to_value();
        assert_eq!(created["metadata"]["name"], "l", "{created}");
        assert!(
            created["metadata"]["uid"].is_string()
                && created["metadata"]["creationTimestamp"].is_string()
        );
        let mut renewed = created.clone();
        renewed["spec"]["holderIdentity"] = json!("b");
        let (renewed, was_created) =
            core.put(leases, "default", "l", renewed, &options).await.unwrap();
        assert!(!was_created);
        assert_eq!(renewed.to_value()["spec"]["holderIdentity"], "b");
        assert_eq!(renewed.to_value()["metadata"]["uid"], created["metadata"]["uid"]);
        let stale = json!({"metadata": {"name": "gone", "resourceVersion": "1"}, "spec": {}});
        let (_, was_created) = core.put(leases, "default", "gone", stale, &options).await.unwrap();
        assert!(was_created, "a resourceVersion does not stop an update's create");
        // The body names its object, as Kubernetes' update handler checks before anything.
        let refusals = [
            (
                json!({"spec": {}}),
                "the name of the object (l2 based on URL) was undeterminable: name must be \
                 provided",
            ),
            (
                json!({"metadata": {"name": "other"}, "spec": {}}),
                "the name of the object (other) does not match the name on the URL (l2)",
            ),
            (
                json!({"metadata": {"name": "other", "namespace": "kube-system"}}),
                "the namespace of the provided object does not match the namespace sent on the \
                 request",
            ),
        ];
        for (body, message) in refusals {
            let refused = core.put(leases, "default", "l2", body, &options).await.unwrap_err();
            assert!(matches!(&refused, ApiError::BadRequest(m) if m == message), "{refused}");
        }
        let nodes = resources::core("nodes");
        let node = json!({"metadata": {"name": "n", "namespace": "ignored"}});
        core.create(nodes, "", node.clone(), &options).await.unwrap();
        let replaced = core.update(nodes, "", "n", node, &options).await.unwrap().to_value();
        assert!(replaced["metadata"].get("namespace").is_none(), "{replaced}");
        let missing_ns = core.put(leases, "nowhere", "l", lease, &options).await.unwrap_err();
        assert!(
            matches!(&missing_ns, ApiError::NotFound { resource: "namespaces", .. }),
            "{missing_ns}"
        );

        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        let refused = core.put(cms, "default", "c", cm, &options).await.unwrap_err();
        assert!(matches!(refused, ApiError::NotFound { resource: "configmaps", .. }), "{refused}");
    }

    #[actix::test]
    async fn one_way_of_collecting_dependents_replaces_the_other() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata": {"name": "c", "finalizers": ["example.com/keep"]}});
        core.create(cms, "default", cm, &WriteOptions::default()).await.unwrap();
        for (policy, finalizers) in [
            ("Foreground", ["example.com/keep", FOREGROUND_FINALIZER]),
            ("Orphan", ["example.com/keep", ORPHAN_FINALIZER]),
            ("Foreground", ["example.com/keep", FOREGROUND_FINALIZER]),
        ] {
            let options =
                DeleteOptions { propagation_policy: Some(policy.into()), ..Default::default() };
            core.delete(cms, "default", "c", &options).await.unwrap();
            let marked = core.get(cms, "default", "c").await.unwrap().to_value();
            assert_eq!(marked["metadata"]["finalizers"], json!(finalizers), "{policy}");
        }
    }

    #[actix::test]
    async fn a_delete_whose_preconditions_fail_says_so_as_kubernetes_does() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata": {"name": "c"}});
        let created = core.create(cms, "default", cm, &WriteOptions::default()).await.unwrap();
        let wrong_uid =
            DeleteOptions { precondition_uid: Some("x".into()), ..DeleteOptions::default() };
        let refused = core.delete(cms, "default", "c", &wrong_uid).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "Operation cannot be fulfilled on ConfigMap \"c\": the UID in the precondition (x) \
                 does not match the UID in record ({}). The object might have been deleted and \
                 then recreated",
                created.uid
            )
        );
        let stale = DeleteOptions {
            precondition_resource_version: Some("1".into()),
            ..DeleteOptions::default()
        };
        let refused = core.delete(cms, "default", "c", &stale).await.unwrap_err();
        assert!(matches!(refused, ApiError::Conflict { resource: "ConfigMap", .. }), "{refused}");
        assert!(refused.to_string().ends_with("The object might have been modified"), "{refused}");
        let right = DeleteOptions {
            precondition_uid: Some(created.uid.clone()),
            ..DeleteOptions::default()
        };
        core.delete(cms, "default", "c", &right).await.unwrap();
    }

    #[actix::test]
    async fn only_finalize_changes_a_namespaces_finalizers() {
        let core = crate::testing::core().await;
        let namespaces = namespaces();
        let options = WriteOptions::default();
        let held = |ns: &Arc<StoredObject>| ns.to_value()["spec"]["finalizers"].clone();
        let ns = json!({"metadata":{"name":"team"},"spec":{"finalizers":["example.com/x"]}});
        let created = core.create(namespaces, "", ns, &options).await.unwrap();
        assert_eq!(held(&created), json!(["example.com/x", "kubernetes"]));
        let bare = json!({"metadata":{"name":"team"}});
        let updated = core.update(namespaces, "", "team", bare, &options).await.unwrap();
        assert_eq!(held(&updated), held(&created), "a PUT without them keeps them");
        let emptied = json!({"spec":{"finalizers":[]}});
        let patched = core
            .patch(namespaces, "", "team", PatchType::Merge, &emptied, false, &options)
            .await
            .unwrap();
        assert_eq!(held(&patched), held(&created), "so does a patch");
        let finalize = json!({"metadata":{"name":"team"},"spec":{"finalizers":["kubernetes"]}});
        let finalized = core.finalize("team", finalize, &options).await.unwrap();
        assert_eq!(held(&finalized), json!(["kubernetes"]));
        assert_eq!(
            finalized.to_value()["metadata"]["labels"],
            updated.to_value()["metadata"]["labels"]
        );
        let marked = core.delete(namespaces, "", "team", &DeleteOptions::default()).await.unwrap();
        assert!(marked.deleting);
        // Deleted again while its content goes: answered as it is, as in Kubernetes.
        let again = core.delete(namespaces, "", "team", &DeleteOptions::default()).await.unwrap();
        assert_eq!(again.resource_version, marked.resource_version);
        let done = json!({"metadata":{"name":"team"},"spec":{}});
        core.finalize("team", done, &options).await.unwrap();
        let key = ObjectKey::new(namespaces, "", "team");
        assert!(core.store.get(&key).await.unwrap().is_none(), "finalized, it is gone");
    }

    #[actix::test]
    async fn a_create_carrying_a_resource_version_is_refused() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"c","resourceVersion":"12"}});
        let error = core.create(cms, "default", cm, &WriteOptions::default()).await;
        assert!(
            matches!(&error, Err(ApiError::BadRequest(m)) if m.contains("resourceVersion")),
            "{error:?}"
        );
        let cm = json!({"metadata":{"name":"c","resourceVersion":""}});
        assert!(core.create(cms, "default", cm, &WriteOptions::default()).await.is_ok());
    }

    #[actix::test]
    async fn a_create_sees_the_namespace_acknowledged_before_it_and_not_one_gone() {
        let core = crate::testing::core().await;
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"c"}});
        let error = core.create(cms, "fresh", cm.clone(), &WriteOptions::default()).await;
        assert!(matches!(error, Err(ApiError::NotFound { .. })), "{error:?}");
        let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fresh"}});
        core.create(namespaces(), "", ns, &WriteOptions::default()).await.unwrap();
        core.create(cms, "fresh", cm.clone(), &WriteOptions::default()).await.unwrap();
        let key = ObjectKey::new(namespaces(), "", "fresh");
        core.store.delete(key, Preconditions::default()).await.unwrap();
        let cm = json!({"metadata":{"name":"d"}});
        let error = core.create(cms, "fresh", cm, &WriteOptions::default()).await;
        assert!(matches!(error, Err(ApiError::NotFound { .. })), "{error:?}");
    }

    #[actix::test]
    async fn a_namespace_being_deleted_takes_no_new_objects() {
        let core = crate::testing::core().await;
        let key = ObjectKey::new(namespaces(), "", "going");
        let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"going",
            "deletionTimestamp":"2026-01-01T00:00:00Z"}});
        // Written to the store directly: the API's delete would also start removing the namespace.
        core.store.create(key, ns).await.unwrap();
        let cms = resources::find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"c"}});
        let error = core.create(cms, "going", cm.clone(), &WriteOptions::default()).await;
        assert!(
            matches!(&error, Err(e @ ApiError::ForbiddenWrite { .. }) if e.to_string().contains("is being terminated")),
            "{error:?}"
        );
        assert!(core.create(cms, "default", cm, &WriteOptions::default()).await.is_ok());
    }
}
