use std::os::unix::fs::PermissionsExt;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

use super::*;
use crate::core::{ApiCore, WriteOptions};

async fn create(core: &ApiCore, plural: &str, namespace: &str, object: Value) {
    let resource = resources::core(plural);
    core.create(resource, namespace, object, &WriteOptions::default()).await.unwrap();
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u1",
            "labels": {"app": "web", "tier": "a \"b\""}},
        "spec": spec
    }))
    .unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[actix::test]
async fn config_maps_secrets_and_the_downward_api_become_files() {
    let core = crate::testing::core().await;
    create(
        &core,
        "configmaps",
        "default",
        json!({"metadata": {"name": "settings"}, "data": {"a.conf": "x=1", "b": "2"},
            "binaryData": {"raw": "AAE="}}),
    )
    .await;
    create(
        &core,
        "secrets",
        "default",
        json!({"metadata": {"name": "creds"},
        "data": {"token": "czNjcjN0"}}),
    )
    .await;
    let pod = pod(json!({
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"memory": "64Mi"}}}],
        "volumes": [
            {"name": "all", "configMap": {"name": "settings"}},
            {"name": "some", "configMap": {"name": "settings", "defaultMode": 0o600,
                "items": [{"key": "b", "path": "dir/bee", "mode": 0o400}]}},
            {"name": "secret", "secret": {"secretName": "creds"}},
            {"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c",
                    "resource": "limits.memory", "divisor": "1Mi"}}]}},
            {"name": "mixed", "projected": {"sources": [
                {"configMap": {"name": "settings", "items": [{"key": "b", "path": "b"}]}},
                {"secret": {"name": "creds"}},
                {"configMap": {"name": "absent", "optional": true}},
                {"clusterTrustBundle": {"name": "b", "path": "bundle"}}]}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "remote", "nfs": {"server": "10.0.0.1", "path": "/x"}}
        ]
    }));
    let dir = tempfile::tempdir().unwrap();
    let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
    let volumes = set_up(&core, &ctx, dir.path()).await.unwrap();
    let path = |name: &str| volumes.set_up[name].path.clone();
    assert_eq!(read(&path("all").join("a.conf")), "x=1");
    assert_eq!(std::fs::read(path("all").join("raw")).unwrap(), [0, 1]);
    assert_eq!(mode(&path("all").join("b")), 0o644);
    assert_eq!(read(&path("some").join("dir/bee")), "2");
    assert_eq!(mode(&path("some").join("dir/bee")), 0o400);
    assert!(!path("some").join("a.conf").exists(), "only the items named");
    assert_eq!(read(&path("secret").join("token")), "s3cr3t");
    assert_eq!(read(&path("info").join("labels")), "app=\"web\"\ntier=\"a \\\"b\\\"\"");
    assert_eq!(read(&path("info").join("name")), "p");
    assert_eq!(read(&path("info").join("mem")), "64");
    assert_eq!(read(&path("mixed").join("b")), "2");
    assert_eq!(read(&path("mixed").join("token")), "s3cr3t");
    assert!(volumes.set_up["mixed"].read_only && !volumes.set_up["scratch"].read_only);
    assert_eq!(mode(&path("scratch")), 0o777);
    let unsupported =
        [("mixed", "clusterTrustBundle"), ("remote", "nfs")].map(|(v, k)| (v.into(), k.into()));
    assert_eq!(volumes.unsupported, unsupported);
    assert!(!path("mixed").join("bundle").exists());

    // A change reaches the files when they are set up again.
    let configmaps = resources::core("configmaps");
    let changed = json!({"metadata": {"name": "settings"},
        "data": {"a.conf": "x=1", "b": "two"}, "binaryData": {"raw": "AAE="}});
    core.update(configmaps, "default", "settings", changed, &WriteOptions::default())
        .await
        .unwrap();
    set_up(&core, &ctx, dir.path()).await.unwrap();
    assert_eq!(read(&path("some").join("dir/bee")), "two");
}

/// With an `fsGroup`, the files are the group's and readable by it, and what is made in an
/// `emptyDir` is the group's, as the kubelet's volume ownership leaves them.
#[actix::test]
async fn volumes_belong_to_the_pod_s_fs_group() {
    use std::os::unix::fs::MetadataExt;
    let core = crate::testing::core().await;
    let secret = json!({"metadata": {"name": "creds"}, "data": {"token": "czNjcjN0"}});
    create(&core, "secrets", "default", secret).await;
    let pod = pod(json!({
        "securityContext": {"runAsUser": 1000, "fsGroup": 2345},
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [
            {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 0o400}},
            {"name": "scratch", "emptyDir": {}}
        ]
    }));
    let dir = tempfile::tempdir().unwrap();
    let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
    let volumes = set_up(&core, &ctx, dir.path()).await.unwrap();
    let path = |name: &str| volumes.set_up[name].path.clone();
    let token = path("secret").join("token");
    assert_eq!((mode(&token), std::fs::metadata(&token).unwrap().gid()), (0o440, 2345));
    let data = std::fs::canonicalize(path("secret").join("..data")).unwrap();
    assert_eq!((mode(&data) & 0o2550, std::fs::metadata(&data).unwrap().gid()), (0o2550, 2345));
    let scratch = path("scratch");
    assert_eq!((mode(&scratch), std::fs::metadata(&scratch).unwrap().gid()), (0o2777, 2345));
    std::fs::write(scratch.join("made"), "x").unwrap();
    assert_eq!(std::fs::metadata(scratch.join("made")).unwrap().gid(), 2345);
    // Set up again, nothing is rewritten: the modes are the ones the files were given.
    let before = std::fs::read_link(path("secret").join("..data")).unwrap();
    set_up(&core, &ctx, dir.path()).await.unwrap();
    assert_eq!(std::fs::read_link(path("secret").join("..data")).unwrap(), before);
}

#[actix::test]
async fn a_missing_source_or_key_is_an_error_in_the_kubelet_s_words() {
    let core = crate::testing::core().await;
    create(
        &core,
        "configmaps",
        "default",
        json!({"metadata": {"name": "settings"},
        "data": {"a": "1"}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let error = |volume: Value| {
        let (core, dir) = (core.clone(), dir.path().to_path_buf());
        async move {
            let pod = pod(json!({"containers": [{"name": "c"}], "volumes": [volume]}));
            let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
            set_up(&core, &ctx, &dir).await.unwrap_err().to_string()
        }
    };
    assert_eq!(
        error(json!({"name": "cfg", "configMap": {"name": "gone"}})).await,
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"gone\" not found"
    );
    assert_eq!(
        error(json!({"name": "s", "secret": {"secretName": "gone"}})).await,
        "MountVolume.SetUp failed for volume \"s\" : secret \"gone\" not found"
    );
    assert_eq!(
        error(json!({"name": "cfg", "configMap": {"name": "settings",
            "items": [{"key": "b", "path": "b"}]}}))
        .await,
        "MountVolume.SetUp failed for volume \"cfg\" : configmap references non-existent \
         config key: b"
    );
    create(&core, "secrets", "default", json!({"metadata": {"name": "creds"}, "data": {}})).await;
    assert_eq!(
        error(json!({"name": "s", "secret": {"secretName": "creds",
            "items": [{"key": "b", "path": "b"}]}}))
        .await,
        "MountVolume.SetUp failed for volume \"s\" : references non-existent secret key: b"
    );
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    assert_eq!(
        error(json!({"name": "h", "hostPath": {"path": file, "type": "Directory"}})).await,
        format!(
            "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: {} is \
             not a directory",
            file.display()
        )
    );
    assert_eq!(
        error(json!({"name": "data", "persistentVolumeClaim": {"claimName": "nope"}})).await,
        "MountVolume.SetUp failed for volume \"data\" : persistentvolumeclaim \"nope\" not found"
    );
}

#[actix::test]
async fn host_paths_are_made_as_their_type_says_and_claims_reach_their_volume_s_path() {
    let core = crate::testing::core().await;
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made/deeper");
    let file = dir.path().join("f");
    let claimed = dir.path().join("claimed");
    create(
        &core,
        "persistentvolumes",
        "",
        json!({"metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": claimed, "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": "default", "name": "data"}}}),
    )
    .await;
    create(
        &core,
        "persistentvolumeclaims",
        "default",
        json!({"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv1",
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let pod = pod(json!({"containers": [{"name": "c"}], "volumes": [
        {"name": "made", "hostPath": {"path": made, "type": "DirectoryOrCreate"}},
        {"name": "file", "hostPath": {"path": file, "type": "FileOrCreate"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}}]}));
    let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
    let volumes = set_up(&core, &ctx, dir.path()).await.unwrap();
    assert!(made.is_dir() && file.is_file() && claimed.is_dir());
    assert_eq!(volumes.set_up["made"].path, made);
    assert_eq!(volumes.set_up["data"], HostVolume { path: claimed, read_only: true });
}

#[test]
fn mounts_bind_volumes_and_sub_paths_outer_first() {
    let dir = tempfile::tempdir().unwrap();
    let volume = |name: &str, read_only| {
        (name.to_string(), HostVolume { path: dir.path().join(name), read_only })
    };
    let volumes = Volumes {
        set_up: [volume("cfg", true), volume("data", false)].into_iter().collect(),
        unsupported: vec![("remote".into(), "nfs".into())],
    };
    let container: Container = serde_json::from_value(json!({"name": "c", "volumeMounts": [
        {"name": "cfg", "mountPath": "/srv/app/conf"},
        {"name": "data", "mountPath": "/srv", "readOnly": true},
        {"name": "data", "mountPath": "/logs", "subPathExpr": "$(POD_NAME)"},
        {"name": "remote", "mountPath": "/remote"}]}))
    .unwrap();
    let env = [("POD_NAME".to_string(), "p".to_string())];
    let mounts = mounts(&container, &volumes, &env).unwrap();
    let shown: Vec<(PathBuf, &str, bool)> = mounts
        .iter()
        .map(|m| {
            (
                m.source.strip_prefix(dir.path()).unwrap().to_path_buf(),
                m.target.to_str().unwrap(),
                m.read_only,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (PathBuf::from("data"), "/srv", true),
            (PathBuf::from("data/p"), "/logs", false),
            (PathBuf::from("cfg"), "/srv/app/conf", true),
        ]
    );
    assert!(dir.path().join("data/p").is_dir(), "a missing sub path is made");
    let refused = |expr: &str, env: &[(&str, &str)]| {
        let escaping: Container = serde_json::from_value(json!({"name": "c", "volumeMounts": [
            {"name": "data", "mountPath": "/x", "subPathExpr": expr}]}))
        .unwrap();
        let env: Vec<(String, String)> =
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        match super::mounts(&escaping, &volumes, &env) {
            Err(LaunchError::Config(message)) => message,
            other => panic!("{expr}: {other:?}"),
        }
    };
    // In the kubelet's words: a variable without a value, a path out of the volume.
    assert_eq!(
        refused("$(UP)", &[("UP", "../..")]),
        "unable to provision SubPath `../..`: must not contain '..'"
    );
    assert_eq!(
        refused("$(AT)", &[("AT", "/tmp")]),
        "error SubPath `/tmp` must not be an absolute path"
    );
    assert_eq!(refused("$(NOPE)/$(EMPTY)/x", &[("EMPTY", "")]), "missing value for EMPTY, NOPE");
}

/// Signs a token as the grant's pod and lifetime, with claims the token manager reads, and a
/// number of its own (no two are the same).
struct Plain;

static SIGNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl crate::core::token_request::GrantSigner for Plain {
    fn api_audiences(&self) -> Vec<String> {
        vec!["api".into()]
    }
    fn sign_grant(&self, grant: &crate::core::token_request::TokenGrant) -> Result<String, String> {
        use base64::Engine as _;
        let claims = json!({"iat": grant.issued_at, "exp": grant.expires_at,
            "aud": grant.audiences, "pod": grant.pod.as_ref().map(|p| &p.name),
            "kubernetes.io": {"warnafter": grant.warn_after},
            "jti": SIGNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)});
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        Ok(format!("h.{claims}.s"))
    }
}

/// A projected token is asked of the API server for the pod's account, bound to the pod, with
/// the source's audience; set up again, the volume keeps it (it needs no renewal yet). A pod
/// whose account is missing cannot have one: the kubelet's reason.
#[actix::test]
async fn projected_tokens_are_asked_for_the_pod_and_kept_until_due() {
    use base64::Engine as _;
    let core = crate::testing::core().await.with_token_signer(std::sync::Arc::new(Plain));
    create(&core, "serviceaccounts", "default", json!({"metadata": {"name": "robot"}})).await;
    let spec = json!({"serviceAccountName": "robot", "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "api", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"serviceAccountToken": {"path": "vault", "audience": "vault"}}]}}]});
    let stored = json!({"metadata": {"name": "p"}, "spec": spec});
    let pods = resources::core("pods");
    let stored = core.create(pods, "default", stored, &WriteOptions::default()).await.unwrap();
    let mut pod = pod(spec);
    pod.metadata.uid = Some(stored.to_value()["metadata"]["uid"].as_str().unwrap().into());
    let dir = tempfile::tempdir().unwrap();
    let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
    let volumes = set_up(&core, &ctx, dir.path()).await.unwrap();
    assert!(volumes.unsupported.is_empty(), "{:?}", volumes.unsupported);
    let path = volumes.set_up["api"].path.clone();
    let claims = |file: &str| -> Value {
        let token = read(&path.join(file));
        let claims = token.split('.').nth(1).unwrap();
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).unwrap();
        serde_json::from_slice(&claims).unwrap()
    };
    let token = claims("token");
    assert_eq!((&token["pod"], &token["aud"]), (&json!("p"), &json!(["api"])));
    assert!(token["kubernetes.io"]["warnafter"].is_i64(), "extended: {token}");
    let vault = claims("vault");
    assert_eq!(
        (&vault["aud"], vault["exp"].as_i64().unwrap() - vault["iat"].as_i64().unwrap()),
        (&json!(["vault"]), 3600)
    );
    assert_eq!(mode(&path.join("token")), 0o644);
    let first = read(&path.join("token"));
    set_up(&core, &ctx, dir.path()).await.unwrap();
    assert_eq!(read(&path.join("token")), first, "kept: not due for renewal");

    // One volume failing leaves the others (the token's) set up.
    let mut mixed = pod.clone();
    let cm = serde_json::from_value(json!({"name": "cfg", "configMap": {"name": "absent"}}));
    mixed.spec.as_mut().unwrap().volumes.as_mut().unwrap().insert(0, cm.unwrap());
    let ctx = PodContext { pod: &mixed, node_name: "n1", pod_ip: "", host_ip: "" };
    let (each, failed) = set_up_each(&core, &ctx, dir.path()).await;
    assert!(each.set_up.contains_key("api") && !each.set_up.contains_key("cfg"));
    assert_eq!(failed.len(), 1, "{failed:?}");
    // A pod whose containers run as one user: the token is that user's alone.
    use std::os::unix::fs::MetadataExt;
    let mut own = pod.clone();
    own.spec.as_mut().unwrap().security_context =
        Some(serde_json::from_value(json!({"runAsUser": 1000})).unwrap());
    let ctx = PodContext { pod: &own, node_name: "n1", pod_ip: "", host_ip: "" };
    let private = tempfile::tempdir().unwrap();
    let volumes = set_up(&core, &ctx, private.path()).await.unwrap();
    let token = volumes.set_up["api"].path.join("token");
    assert_eq!(mode(&token), 0o600);
    assert_eq!(std::fs::metadata(&token).unwrap().uid(), 1000);

    let mut orphan = pod.clone();
    orphan.spec.as_mut().unwrap().service_account_name = Some("ghost".into());
    let ctx = PodContext { pod: &orphan, node_name: "n1", pod_ip: "", host_ip: "" };
    let other = tempfile::tempdir().unwrap();
    let error = set_up(&core, &ctx, other.path()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "MountVolume.SetUp failed for volume \"api\" : failed to fetch token: serviceaccounts \"ghost\" not found"
    );
}
