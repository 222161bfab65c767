//! The pods' `eviction` subresource (policy/v1 `Eviction`, what `kubectl drain` posts): deletes
//! a pod unless that would take its PodDisruptionBudget below the healthy pods it must keep,
//! as kube-apiserver's eviction storage does. An allowed eviction is counted in the budget's
//! status (one disruption fewer, the pod named in `disruptedPods` until the disruption
//! controller sees it go) before the pod is marked a disruption target and deleted.

use serde_json::{json, Value};

use super::{
    check_subresource_names, ApiCore, ApiError, DeleteOptions, PatchType, WriteOptions,
    UPDATE_RETRIES,
};
use crate::model::disruption::{pod_selector, set_allowed_condition};
use crate::model::{is_being_deleted, is_ready, json, resources, Labels, StoredObject};

/// More pods than this waiting in a budget's `disruptedPods` means the disruption controller
/// is not keeping up: evictions are refused until it does (Kubernetes' `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

impl ApiCore {
    /// Evicts pod `name` (POST `pods/{name}/eviction`): `eviction` is the policy/v1 `Eviction`
    /// body, `options` the delete options it carries.
    pub async fn evict(
        &self,
        namespace: &str,
        name: &str,
        eviction: &Value,
        options: DeleteOptions,
    ) -> Result<(), ApiError> {
        let pods = resources::core("pods");
        self.check_namespace_accepts(pods, namespace, name)?;
        check_subresource_names(eviction, "Eviction", namespace, name)?;
        let client_pinned = options.precondition_resource_version.is_some();
        // A pod that disrupts nothing goes at once; one that is Pending is pinned to the
        // version looked at, so that one turning Running meanwhile is looked at again.
        let mut pod = self.get(pods, namespace, name).await?;
        for _ in 0..UPDATE_RETRIES {
            let pod_value = pod.to_value();
            if !disrupts_nothing(&pod_value) {
                break;
            }
            let mut options = options.clone();
            let pending =
                json::at(&pod_value, "/status/phase").and_then(Value::as_str) == Some("Pending");
            if pending && !client_pinned {
                options.precondition_resource_version = Some(pod.resource_version.to_string());
            }
            match self.mark_and_delete(&pod, options).await {
                Err(ApiError::Conflict { .. }) if pending && !client_pinned => {
                    pod = self.get(pods, namespace, name).await?;
                }
                done => return done,
            }
        }
        let pod_value = pod.to_value();
        let budgets = self.budgets_of(namespace, &pod_value).await?;
        let mut budget = match budgets.as_slice() {
            [] => return self.mark_and_delete(&pod, options).await,
            [one] => one.clone(),
            _ => {
                return Err(ApiError::Unsupported(
                    "This pod has more than one PodDisruptionBudget, which the eviction \
                     subresource does not support."
                        .into(),
                ))
            }
        };
        let budget_name = json::at(&budget, "/metadata/name").and_then(Value::as_str);
        let budget_name = budget_name.unwrap_or("").to_string();
        let ready = is_ready(&pod_value);
        for _ in 0..UPDATE_RETRIES {
            let status = |field: &str| {
                json::at(&budget, &format!("/status/{field}")).and_then(Value::as_i64).unwrap_or(0)
            };
            // A pod that is not ready does not count as healthy: it may go, spending nothing,
            // when its budget says unhealthy pods always may, or holds without it; pinned to
            // the version looked at (it must still be the pod that was not ready).
            let policy = json::at(&budget, "/spec/unhealthyPodEvictionPolicy");
            let always = policy.and_then(Value::as_str) == Some("AlwaysAllow");
            let (desired, current) = (status("desiredHealthy"), status("currentHealthy"));
            if !ready && (always || (current >= desired && desired > 0)) {
                let mut options = options.clone();
                if !client_pinned {
                    options.precondition_resource_version = Some(pod.resource_version.to_string());
                }
                return match self.mark_and_delete(&pod, options).await {
                    // The pod changed: the client tries again, as kube-apiserver asks it to.
                    Err(ApiError::Conflict { .. }) if !client_pinned => {
                        Err(still_processed(&budget_name))
                    }
                    done => done,
                };
            }
            match self.spend_disruption(&budget, &budget_name, name, options.dry_run).await {
                Err(ApiError::Conflict { .. }) => {
                    let budgets = resources::disruption_budgets();
                    budget = self.get(budgets, namespace, &budget_name).await?.to_value();
                }
                Err(other) => return Err(other),
                Ok(()) => return self.mark_and_delete(&pod, options).await,
            }
        }
        Err(still_processed(&budget_name))
    }

    /// The budgets of `namespace` whose selector picks `pod`. A budget with no selector, or
    /// an empty one, picks none here, as in Kubernetes' eviction.
    async fn budgets_of(&self, namespace: &str, pod: &Value) -> Result<Vec<Value>, ApiError> {
        let budgets = resources::disruption_budgets();
        let listed = self.list(budgets, Some(namespace), &Default::default()).await?;
        let labels = Labels::of(pod);
        let picks = |budget: &Value| {
            pod_selector(budget)
                .is_some_and(|selector| !selector.is_empty() && selector.matches(&labels))
        };
        Ok(listed.items.iter().map(|b| b.to_value()).filter(picks).collect())
    }

    /// Takes one disruption from `budget` for `pod` and names the pod in its
    /// `disruptedPods` (a write of its status, unless `dry_run`).
    async fn spend_disruption(
        &self,
        budget: &Value,
        budget_name: &str,
        pod: &str,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let budgets = resources::disruption_budgets();
        let status = budget.get("status").cloned().unwrap_or_else(|| json!({}));
        let observed = status.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0);
        let generation = json::at(budget, "/metadata/generation").and_then(Value::as_i64);
        if observed < generation.unwrap_or(0) {
            return Err(still_processed(budget_name));
        }
        let allowed = status.get("disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0);
        let disrupted = status.get("disruptedPods").and_then(Value::as_object);
        if allowed < 0 {
            let why = "pdb disruptions allowed is negative".to_string();
            return Err(ApiError::forbidden(budgets, budget_name, why, Vec::new()));
        }
        if disrupted.map_or(0, |d| d.len()) > MAX_DISRUPTED_PODS {
            let why = "DisruptedPods map too big - too many evictions not confirmed by PDB \
                       controller"
                .to_string();
            return Err(ApiError::forbidden(budgets, budget_name, why, Vec::new()));
        }
        if allowed == 0 {
            let count = |field: &str| status.get(field).and_then(Value::as_i64).unwrap_or(0);
            return Err(ApiError::DisruptionBudget {
                cause: format!(
                    "The disruption budget {budget_name} needs {} healthy pods and has {} currently",
                    count("desiredHealthy"),
                    count("currentHealthy")
                ),
                retry_after_seconds: 0,
            });
        }
        if dry_run {
            return Ok(());
        }
        let mut status = status.as_object().cloned().unwrap_or_default();
        status.insert("disruptionsAllowed".into(), json!(allowed - 1));
        if allowed == 1 {
            set_allowed_condition(&mut status, None);
        }
        let disrupted = status.entry("disruptedPods").or_insert_with(|| json!({}));
        if !disrupted.is_object() {
            *disrupted = json!({});
        }
        disrupted[pod] = json!(crate::model::now());
        let mut updated = budget.clone();
        updated["status"] = Value::Object(status);
        let namespace = json::at(budget, "/metadata/namespace").and_then(Value::as_str);
        let options = WriteOptions::default();
        self.update_status(budgets, namespace.unwrap_or(""), budget_name, updated, &options)
            .await
            .map(|_| ())
    }

    /// Marks `pod` a disruption target (reason `EvictionByEvictionAPI`), unless this is a dry
    /// run, then deletes it with `options`.
    async fn mark_and_delete(
        &self,
        pod: &StoredObject,
        mut options: DeleteOptions,
    ) -> Result<(), ApiError> {
        let pods = resources::core("pods");
        let (namespace, name) = (pod.key.namespace.as_str(), pod.key.name.as_str());
        if !options.dry_run {
            // The client's preconditions first: a pod that is not to be deleted is not marked.
            let check = DeleteOptions { dry_run: true, ..options.clone() };
            self.delete(pods, namespace, name, &check).await?;
            let condition = json!({"type": "DisruptionTarget", "status": "True",
                "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                "lastTransitionTime": crate::model::now()});
            let mut patch = json!({"metadata": {"uid": pod.uid},
                "status": {"conditions": [condition]}});
            if let Some(version) = &options.precondition_resource_version {
                patch["metadata"]["resourceVersion"] = json!(version);
            }
            let strategic = PatchType::StrategicMerge;
            let written = self
                .patch(pods, namespace, name, strategic, &patch, true, &WriteOptions::default())
                .await?;
            // The condition is this eviction's own change: a precondition on the version
            // looked at holds for the version it wrote.
            if options.precondition_resource_version.is_some() {
                options.precondition_resource_version = Some(written.resource_version.to_string());
            }
        }
        self.delete(pods, namespace, name, &options).await.map(|_| ())
    }
}

/// The 429 of a budget the controller has not counted since it changed (or of an eviction
/// that raced with another write): the client tries again in 10 s.
fn still_processed(budget_name: &str) -> ApiError {
    ApiError::DisruptionBudget {
        cause: format!(
            "The disruption budget {budget_name} is still being processed by the server."
        ),
        retry_after_seconds: 10,
    }
}

/// A pod whose eviction takes nothing from any budget: one finished or not yet running, or
/// already going.
fn disrupts_nothing(pod: &Value) -> bool {
    let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
    matches!(phase, Some("Succeeded" | "Failed" | "Pending")) || is_being_deleted(pod)
}
