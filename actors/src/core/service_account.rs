//! The ServiceAccount admission plugin, as Kubernetes enables it by default, for pods on
//! create: a pod that names no service account runs as its namespace's `default` one; the
//! account it runs as must exist (403 otherwise); a pod that names no image pull secrets gets
//! its account's; an account annotated `kubernetes.io/enforce-mountable-secrets: "true"`
//! limits the secrets its pods reference to its own. Mirror pods (a node's static pods) are
//! left as they are and may reference neither accounts nor secrets.
//!
//! While the API server serves its secure port (where a pod's token is good), every container
//! of a pod whose account (or the pod itself) does not turn `automountServiceAccountToken` off
//! mounts a `kube-api-access-XXXXX` volume at `/var/run/secrets/kubernetes.io/serviceaccount`:
//! a token for the account, the `kube-root-ca.crt` certificate and the pod's namespace, which
//! in-cluster clients read.

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

/// Where containers find their API token, certificate and namespace.
pub const API_ACCESS_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the name of the volume holding them.
pub const API_ACCESS_VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime the volume's token asks for: an hour and seven seconds, which Kubernetes
/// recognizes to extend the token (and only warn after the hour).
pub const API_ACCESS_TOKEN_SECONDS: i64 = 3607;

/// Admits `pod`, being created in `namespace`: `Err` says why it is forbidden. With
/// `mount_api_access`, its containers get the account's API token volume (see the module's
/// doc).
pub(crate) async fn admit(
    store: &Store,
    namespace: &str,
    pod: &mut Value,
    mount_api_access: bool,
) -> Result<(), String> {
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
    let pod_says = spec.get("automountServiceAccountToken").and_then(Value::as_bool);
    if mount_api_access && pod_says.or(account.automount).unwrap_or(true) {
        mount_api_access_volume(spec);
    }
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

/// Mounts a `kube-api-access-*` volume (the pod's own, if it has one) at
/// [`API_ACCESS_MOUNT_PATH`] in every init and regular container that mounts nothing there,
/// adding the volume when one does and the pod had none, as Kubernetes'
/// `mountServiceAccountToken`. Ephemeral containers are left as they are.
fn mount_api_access_volume(spec: &mut serde_json::Map<String, Value>) {
    let volumes = spec.get("volumes").and_then(Value::as_array);
    let names = volumes.into_iter().flatten().filter_map(|v| v.get("name")?.as_str());
    let existing = names.into_iter().find(|n| n.starts_with(API_ACCESS_VOLUME_PREFIX));
    let existing = existing.map(str::to_string);
    let name = existing.clone().unwrap_or_else(|| super::generated_name(API_ACCESS_VOLUME_PREFIX));
    let mount = json!({"name": name, "readOnly": true, "mountPath": API_ACCESS_MOUNT_PATH});
    let mut mounted = false;
    for field in ["initContainers", "containers"] {
        let containers = spec.get_mut(field).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else { continue };
            let path = |m: &Value| m.get("mountPath").and_then(Value::as_str).map(str::to_string);
            if mounts.iter().any(|m| path(m).as_deref() == Some(API_ACCESS_MOUNT_PATH)) {
                continue;
            }
            mounts.push(mount.clone());
            mounted = true;
        }
    }
    if existing.is_none() && mounted {
        let volume = api_access_volume(&name);
        match spec.get_mut("volumes").and_then(Value::as_array_mut) {
            Some(volumes) => volumes.push(volume),
            None => {
                spec.insert("volumes".into(), json!([volume]));
            }
        }
    }
}

/// The projected volume of an API token (its path `token`), the API server's certificate
/// (`ca.crt`, from the namespace's `kube-root-ca.crt`) and the pod's namespace (`namespace`).
fn api_access_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": API_ACCESS_TOKEN_SECONDS, "path": "token"}},
        {"configMap": {"name": crate::controllers::every_namespace::ROOT_CA_CONFIG_MAP,
            "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})
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

    /// Every init and regular container mounts the API token volume unless it mounts something
    /// at its path; the pod's own `kube-api-access-*` volume is used when it has one; no
    /// volume is added that no container mounts; ephemeral containers are left out.
    #[test]
    fn containers_mount_the_api_token_volume() {
        let mut spec = json!({
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
                {"name": "b", "volumeMounts": [{"name": "v", "mountPath": API_ACCESS_MOUNT_PATH}]}],
            "ephemeralContainers": [{"name": "e"}],
            "volumes": [{"name": "v", "emptyDir": {}}]});
        mount_api_access_volume(spec.as_object_mut().unwrap());
        let volume = spec["volumes"][1].clone();
        let name = volume["name"].as_str().unwrap().to_string();
        assert!(name.starts_with(API_ACCESS_VOLUME_PREFIX) && name.len() == 21, "{name}");
        assert_eq!(volume, api_access_volume(&name));
        assert_eq!(volume["projected"]["defaultMode"], 420);
        assert_eq!(
            volume["projected"]["sources"][0],
            json!({"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}})
        );
        let mount = json!({"name": name, "readOnly": true, "mountPath": API_ACCESS_MOUNT_PATH});
        assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(spec["containers"][0]["volumeMounts"][1], mount);
        assert_eq!(spec["containers"][1]["volumeMounts"].as_array().unwrap().len(), 1);
        assert!(spec["ephemeralContainers"][0].get("volumeMounts").is_none());
        // The pod's own volume of that name: mounted, not added again.
        let mut own = json!({"containers": [{"name": "a"}],
            "volumes": [{"name": "kube-api-access-mine", "emptyDir": {}}]});
        mount_api_access_volume(own.as_object_mut().unwrap());
        assert_eq!(own["volumes"].as_array().unwrap().len(), 1);
        assert_eq!(own["containers"][0]["volumeMounts"][0]["name"], "kube-api-access-mine");
        // Every container mounts its own: no volume.
        let mut taken = json!({"containers": [{"name": "a", "volumeMounts": [
            {"name": "x", "mountPath": API_ACCESS_MOUNT_PATH}]}]});
        mount_api_access_volume(taken.as_object_mut().unwrap());
        assert!(taken.get("volumes").is_none(), "{taken}");
    }

    /// The pod's `automountServiceAccountToken` wins over its account's; both unset mounts.
    #[actix::test]
    async fn automount_is_the_pods_choice_then_its_accounts() {
        let core = crate::testing::core().await.with_api_access_volumes();
        let options = crate::core::WriteOptions::default();
        let accounts = crate::model::resources::core("serviceaccounts");
        for (name, automount) in [("on", Value::Null), ("off", json!(false))] {
            let account =
                json!({"metadata": {"name": name}, "automountServiceAccountToken": automount});
            core.create(accounts, "default", account, &options).await.unwrap();
        }
        let pods = crate::model::resources::core("pods");
        let cases = [
            ("on", Value::Null, true),
            ("off", Value::Null, false),
            ("off", json!(true), true),
            ("on", json!(false), false),
        ];
        for (i, (account, pod_says, mounted)) in cases.into_iter().enumerate() {
            let pod = json!({"metadata": {"name": format!("p{i}")}, "spec": {
                "serviceAccountName": account, "automountServiceAccountToken": pod_says,
                "containers": [{"name": "c", "image": "i"}]}});
            let pod = core.create(pods, "default", pod, &options).await.unwrap().to_value();
            let volumes = pod["spec"]["volumes"].as_array().map_or(0, Vec::len);
            assert_eq!(volumes == 1, mounted, "{account} {pod_says}: {pod}");
        }
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
            automount: None,
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
