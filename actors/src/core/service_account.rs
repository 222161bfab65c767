//! The ServiceAccount admission plugin, as Kubernetes enables it by default, for pods on
//! create: a pod that names no service account runs as its namespace's `default` one; the
//! account it runs as must exist (403 otherwise); a pod that names no image pull secrets gets
//! its account's; an account annotated `kubernetes.io/enforce-mountable-secrets: "true"`
//! limits the secrets its pods reference to its own. Mirror pods (a node's static pods) are
//! left as they are and may reference neither accounts nor secrets.
//!
//! Unlike Kubernetes' plugin, this one mounts no API token volume (`kube-api-access-*`): the
//! node agent sets up no projected service account tokens.

use std::time::Duration;

use serde_json::{json, Value};

use crate::model::json;
use crate::store::{AccountRefs, Store};

/// The account a pod runs as when it names none, which every namespace has.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Marks a pod a node agent made of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// How long a create waits for its namespace's `default` account, which the service account
/// controller writes just after the namespace (Kubernetes' plugin asks again up to ten times,
/// 100 to 200 ms apart).
const DEFAULT_ACCOUNT_WAIT: Duration = Duration::from_secs(2);
const DEFAULT_ACCOUNT_POLL: Duration = Duration::from_millis(10);

/// Admits `pod`, being created in `namespace`: `Err` says why it is forbidden.
pub(crate) async fn admit(store: &Store, namespace: &str, pod: &mut Value) -> Result<(), String> {
    if is_mirror(pod) {
        return check_mirror(pod);
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(()); // validation names what is missing
    };
    let named = spec.get("serviceAccountName").and_then(Value::as_str).unwrap_or("");
    let name =
        if named.is_empty() { DEFAULT_SERVICE_ACCOUNT.to_string() } else { named.to_string() };
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
    let Some(account) = account(store, namespace, &name).await else {
        return Err(format!(
            "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
        ));
    };
    let pull_secrets = spec.get("imagePullSecrets").and_then(Value::as_array);
    if pull_secrets.is_none_or(Vec::is_empty) && !account.image_pull_secrets.is_empty() {
        let refs = account.image_pull_secrets.iter().map(|s| json!({"name": s})).collect();
        spec.insert("imagePullSecrets".into(), Value::Array(refs));
    }
    match (&account.mountable_secrets, pod.get("spec")) {
        (Some(mountable), Some(spec)) => check_secret_references(spec, &name, mountable, &account),
        _ => Ok(()),
    }
}

/// Admits ephemeral containers added to `pod` (its `ephemeralcontainers` subresource, what
/// `kubectl debug` writes), as Kubernetes' plugin does since its fixes of CVE-2023-2728: the pod
/// must run as an existing account, and one that enforces its mountable secrets limits the
/// secrets the ephemeral containers' environment names to its own.
pub(crate) fn admit_ephemeral(store: &Store, namespace: &str, pod: &Value) -> Result<(), String> {
    let name = name_at(pod, "/spec/serviceAccountName").unwrap_or("");
    if name.is_empty() {
        let pod_name = name_at(pod, "/metadata/name").unwrap_or("");
        return Err(format!("no service account specified for pod {namespace}/{pod_name}"));
    }
    let Some(account) = store.service_account(namespace, name) else {
        return Err(format!(
            "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
        ));
    };
    let Some(mountable) = &account.mountable_secrets else { return Ok(()) };
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    check_container_secrets(
        spec,
        &[("ephemeralContainers", "ephemeral container")],
        name,
        mountable,
    )
}

/// The account, from the admission tables; `default` is waited for a moment.
async fn account(
    store: &Store,
    namespace: &str,
    name: &str,
) -> Option<std::sync::Arc<AccountRefs>> {
    let found = store.service_account(namespace, name);
    if found.is_some() || name != DEFAULT_SERVICE_ACCOUNT {
        return found;
    }
    let deadline = tokio::time::Instant::now() + DEFAULT_ACCOUNT_WAIT;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(DEFAULT_ACCOUNT_POLL).await;
        if let Some(found) = store.service_account(namespace, name) {
            return Some(found);
        }
    }
    None
}

fn is_mirror(pod: &Value) -> bool {
    json::at(pod, "/metadata/annotations").and_then(|a| a.get(MIRROR_ANNOTATION)).is_some()
}

/// What a mirror pod may not reference.
fn check_mirror(pod: &Value) -> Result<(), String> {
    let Some(spec) = pod.get("spec") else { return Ok(()) };
    let text = |field: &str| spec.get(field).and_then(Value::as_str).unwrap_or("");
    if !text("serviceAccountName").is_empty() {
        return Err("a mirror pod may not reference service accounts".into());
    }
    if !secret_names(spec).is_empty() {
        return Err("a mirror pod may not reference secrets".into());
    }
    let projections = list(spec, "volumes")
        .filter_map(|v| json::at(v, "/projected/sources")?.as_array())
        .flatten();
    if projections.into_iter().any(|p| p.get("serviceAccountToken").is_some()) {
        return Err("a mirror pod may not use ServiceAccountToken volume projections".into());
    }
    Ok(())
}

fn list<'a>(holder: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    holder.get(field).and_then(Value::as_array).into_iter().flatten()
}

fn name_at<'a>(holder: &'a Value, pointer: &str) -> Option<&'a str> {
    json::at(holder, pointer).and_then(Value::as_str)
}

/// Every secret a pod spec names, as Kubernetes' `VisitPodSecretNames` finds them: image
/// pull secrets, containers' environment, and volumes of every kind that takes a secret.
fn secret_names(spec: &Value) -> Vec<&str> {
    const VOLUME_REFS: &[&str] = &[
        "/secret/secretName",
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/flexVolume/secretRef/name",
        "/rbd/secretRef/name",
        "/scaleIO/secretRef/name",
        "/iscsi/secretRef/name",
        "/storageos/secretRef/name",
        "/csi/nodePublishSecretRef/name",
    ];
    let mut names: Vec<&str> =
        list(spec, "imagePullSecrets").filter_map(|r| name_at(r, "/name")).collect();
    for container in ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|field| list(spec, field))
    {
        names.extend(
            list(container, "env").filter_map(|e| name_at(e, "/valueFrom/secretKeyRef/name")),
        );
        names.extend(list(container, "envFrom").filter_map(|e| name_at(e, "/secretRef/name")));
    }
    for volume in list(spec, "volumes") {
        names.extend(VOLUME_REFS.iter().filter_map(|at| name_at(volume, at)));
        let sources = list(volume.get("projected").unwrap_or(&Value::Null), "sources");
        names.extend(sources.filter_map(|s| name_at(s, "/secret/name")));
    }
    names
}

/// An enforcing account's check: the pod's secret volumes, containers' environment and image
/// pull secrets name only secrets the account lists (`mountable`, and its pull secrets).
fn check_secret_references(
    spec: &Value,
    account_name: &str,
    mountable: &[String],
    account: &AccountRefs,
) -> Result<(), String> {
    let allowed = |name: &str| mountable.iter().any(|m| m == name);
    let refused = format!(
        "is not allowed because service account {account_name} does not reference that secret"
    );
    for secret in list(spec, "volumes").filter_map(|v| name_at(v, "/secret/secretName")) {
        if !allowed(secret) {
            return Err(format!("volume with secret.secretName=\"{secret}\" {refused}"));
        }
    }
    let containers = [("initContainers", "init container"), ("containers", "container")];
    check_container_secrets(spec, &containers, account_name, mountable)?;
    for (i, secret) in list(spec, "imagePullSecrets").enumerate() {
        let secret = name_at(secret, "/name").unwrap_or("");
        if !account.image_pull_secrets.iter().any(|p| p == secret) {
            return Err(format!(
                "imagePullSecrets[{i}].name=\"{secret}\" is not allowed because service account \
                 {account_name} does not reference that imagePullSecret"
            ));
        }
    }
    Ok(())
}

/// The environment of the containers of `fields` (each with the words naming one) names only
/// secrets an enforcing account lists (`mountable`).
fn check_container_secrets(
    spec: &Value,
    fields: &[(&str, &str)],
    account_name: &str,
    mountable: &[String],
) -> Result<(), String> {
    let allowed = |name: &str| mountable.iter().any(|m| m == name);
    let refused = format!(
        "is not allowed because service account {account_name} does not reference that secret"
    );
    for (field, what) in fields {
        for container in list(spec, field) {
            let name = name_at(container, "/name").unwrap_or("");
            for env in list(container, "env") {
                let Some(secret) = name_at(env, "/valueFrom/secretKeyRef/name") else { continue };
                if !allowed(secret) {
                    let var = name_at(env, "/name").unwrap_or("");
                    return Err(format!(
                        "{what} {name} with envVar {var} referencing secret.secretName=\"{secret}\" {refused}"
                    ));
                }
            }
            for secret in list(container, "envFrom").filter_map(|e| name_at(e, "/secretRef/name")) {
                if !allowed(secret) {
                    return Err(format!(
                        "{what} {name} with envFrom referencing secret.secretName=\"{secret}\" {refused}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_pods_reference_neither_accounts_nor_secrets() {
        let mirror = |spec: Value| json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}, "spec": spec});
        let pod = mirror(json!({"containers": [{"name": "c", "image": "i"}]}));
        assert!(is_mirror(&pod) && check_mirror(&pod).is_ok());
        let named = mirror(json!({"serviceAccountName": "robot"}));
        assert_eq!(
            check_mirror(&named).unwrap_err(),
            "a mirror pod may not reference service accounts"
        );
        let env = mirror(json!({"containers": [{"name": "c", "env": [
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}));
        assert_eq!(check_mirror(&env).unwrap_err(), "a mirror pod may not reference secrets");
        let token = mirror(json!({"volumes": [{"name": "t", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}}]}}]}));
        assert!(check_mirror(&token)
            .unwrap_err()
            .contains("ServiceAccountToken volume projections"));
    }

    #[test]
    fn finds_secrets_wherever_a_pod_spec_names_them() {
        let spec = json!({
            "imagePullSecrets": [{"name": "pull"}],
            "initContainers": [{"envFrom": [{"secretRef": {"name": "init-from"}}]}],
            "containers": [{"env": [{"name": "A", "value": "plain"},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]}],
            "volumes": [{"name": "a", "secret": {"secretName": "vol"}},
                {"name": "b", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "c", "projected": {"sources": [{"secret": {"name": "projected"}}]}},
                {"name": "d", "emptyDir": {}}]});
        let mut names = secret_names(&spec);
        names.sort_unstable();
        assert_eq!(names, ["csi", "env", "init-from", "projected", "pull", "vol"]);
    }

    #[test]
    fn an_enforcing_account_limits_the_secrets_its_pods_reference() {
        let account = AccountRefs {
            image_pull_secrets: vec!["pull".into()],
            mountable_secrets: Some(vec!["ok".into()]),
        };
        let check = |spec: Value| {
            check_secret_references(
                &spec,
                "robot",
                account.mountable_secrets.as_ref().unwrap(),
                &account,
            )
        };
        let fine = json!({"imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "ok"}}]}],
            "volumes": [{"name": "v", "secret": {"secretName": "ok"}}]});
        assert_eq!(check(fine), Ok(()));
        let volume = json!({"volumes": [{"name": "v", "secret": {"secretName": "other"}}]});
        assert_eq!(
            check(volume).unwrap_err(),
            "volume with secret.secretName=\"other\" is not allowed because service account robot \
             does not reference that secret"
        );
        let env = json!({"initContainers": [{"name": "setup", "env": [{"name": "PW",
            "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]});
        assert!(check(env).unwrap_err().starts_with(
            "init container setup with envVar PW referencing secret.secretName=\"other\""
        ));
        let pull = json!({"imagePullSecrets": [{"name": "pull"}, {"name": "mine"}]});
        assert!(check(pull)
            .unwrap_err()
            .starts_with("imagePullSecrets[1].name=\"mine\" is not allowed"));
    }
}
