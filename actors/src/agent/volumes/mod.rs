//! A pod's volumes on the node, as the kubelet's volume plugins set them up: an `emptyDir` is a
//! directory of the pod's (`volumes/<name>` under its directory), a `configMap`, `secret`,
//! `downwardAPI` or `projected` one such a directory filled with its files (see
//! [`atomic_writer`]; a projected service account token is asked of the API server, see
//! [`tokens`]), a `hostPath` the node's path (checked or made as its `type` says), a
//! `persistentVolumeClaim` the path of the `hostPath` or `local` volume its claim is bound to.
//! What each container mounts of them ([`mounts`]) the runtime binds at its `mountPath`, in a
//! mount namespace of the container's own.
//!
//! Volumes of other kinds (NFS, CSI, cloud disks) are not set up: the node cannot mount them,
//! and its containers run without them (a warning event says so).

pub mod atomic_writer;
mod tokens;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeFile, KeyToPath, PersistentVolume, PersistentVolumeClaim, Volume,
    VolumeProjection,
};
use serde_json::Value;

use self::atomic_writer::{File, Payload};
use super::launch::{self, LaunchError, PodContext};
use crate::client::ApiClient;
use crate::core::ApiError;
use crate::model::resources;

/// The mode of a volume's files when neither the item nor the volume gives one (0644).
const DEFAULT_MODE: u32 = 0o644;

/// A volume a container binds: `source` on the node at `target` in the container.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
}

/// A volume as set up on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostVolume {
    pub path: PathBuf,
    /// Mounted read-only whatever the container asks (the kubelet's for ConfigMaps, Secrets,
    /// downward API and projected volumes, and a claim the pod takes `readOnly`).
    pub read_only: bool,
}

/// Why a volume could not be set up: the container waits (`ContainerCreating`) and the node
/// tries again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {reason}")]
pub struct VolumeError {
    pub volume: String,
    pub reason: String,
}

/// The pod's volumes, set up: by name, where each is on the node; and what of them the node
/// cannot set up, by volume (`nfs`, or a projection's `clusterTrustBundle`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Volumes {
    pub set_up: BTreeMap<String, HostVolume>,
    pub unsupported: Vec<(String, String)>,
}

/// Where a pod's volume `name` of its own lives, under the pod's directory.
pub(crate) fn own_dir(pod_dir: &Path, name: &str) -> PathBuf {
    pod_dir.join("volumes").join(name)
}

/// Sets up (or brings up to date: files are rewritten only when they changed) the volumes of
/// `ctx`'s pod, whose directory is `pod_dir`: all of them, or the first one's failure.
pub async fn set_up(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    pod_dir: &Path,
) -> Result<Volumes, VolumeError> {
    let (volumes, failed) = set_up_each(client, ctx, pod_dir).await;
    match failed.into_iter().next() {
        Some(failure) => Err(failure),
        None => Ok(volumes),
    }
}

/// As [`set_up`], each volume on its own, as the kubelet mounts them: those that could be set
/// up, and why each of the others could not (one failing leaves the others, a token's renewal
/// among them, going).
pub async fn set_up_each(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    pod_dir: &Path,
) -> (Volumes, Vec<VolumeError>) {
    let mut volumes = Volumes::default();
    let mut failed = Vec::new();
    let spec = ctx.pod.spec.as_ref();
    let fs_group = spec
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.fs_group)
        .and_then(|g| u32::try_from(g).ok());
    let fs_user = fs_user(ctx.pod);
    for volume in spec.and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        let own = own_dir(pod_dir, &volume.name);
        let set_up = set_up_one(client, ctx, volume, own, fs_group, fs_user, &mut volumes).await;
        if let Err(failure) = set_up {
            failed.push(failure);
        }
    }
    (volumes, failed)
}

/// Sets up `volume` (in its own directory `own`), adding it to `volumes`.
async fn set_up_one(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    volume: &Volume,
    own: PathBuf,
    fs_group: Option<u32>,
    fs_user: Option<u32>,
    volumes: &mut Volumes,
) -> Result<(), VolumeError> {
    let failed = |reason: String| VolumeError { volume: volume.name.clone(), reason };
    let host = match kind(volume) {
        Kind::EmptyDir => {
            let made = !own.exists();
            make_shared_dir(&own).map_err(|e| failed(e.to_string()))?;
            if let Some(group) = fs_group.filter(|_| made) {
                give_to_group(&own, group, false).map_err(|e| failed(e.to_string()))?;
            }
            HostVolume { path: own, read_only: false }
        }
        Kind::Files => {
            for projection in projections_of(volume) {
                if projection.cluster_trust_bundle.is_some() {
                    let kind = "clusterTrustBundle".to_string();
                    volumes.unsupported.push((volume.name.clone(), kind));
                }
            }
            // A token is its user's alone when the pod names one (or a group, which is given
            // read access below), as the kubelet's projection leaves it.
            let private = fs_user.is_some() || fs_group.is_some();
            let mut payload = payload(client, ctx, volume, &own, private).await.map_err(failed)?;
            if fs_group.is_some() {
                // Readable by the group, as its ownership below leaves them.
                payload.values_mut().for_each(|file| file.mode |= 0o440);
            }
            let written =
                atomic_writer::write(&own, &payload).map_err(|e| failed(e.to_string()))?;
            if let Some(user) = fs_user.filter(|_| written) {
                let tokens =
                    projections_of(volume).filter_map(|p| p.service_account_token.as_ref());
                for token in tokens {
                    let path = own.join(&token.path);
                    std::os::unix::fs::chown(&path, Some(user), None)
                        .map_err(|e| failed(format!("chown {}: {e}", path.display())))?;
                }
            }
            if let Some(group) = fs_group.filter(|_| written) {
                give_to_group(&own, group, true).map_err(|e| failed(e.to_string()))?;
            }
            HostVolume { path: own, read_only: true }
        }
        Kind::HostPath => {
            let source = volume.host_path.as_ref().expect("its kind");
            let path = PathBuf::from(&source.path);
            check_host_path(&path, source.type_.as_deref().unwrap_or("")).map_err(failed)?;
            HostVolume { path, read_only: false }
        }
        Kind::Claim => {
            let claim = volume.persistent_volume_claim.as_ref().expect("its kind");
            let path = claimed_path(client, ctx, &claim.claim_name).await.map_err(failed)?;
            HostVolume { path, read_only: claim.read_only.unwrap_or(false) }
        }
        Kind::Other(kind) => {
            volumes.unsupported.push((volume.name.clone(), kind));
            return Ok(());
        }
    };
    volumes.set_up.insert(volume.name.clone(), host);
    Ok(())
}

/// The sources of a projected volume (none for another kind).
fn projections_of(volume: &Volume) -> impl Iterator<Item = &VolumeProjection> {
    volume.projected.iter().flat_map(|p| p.sources.iter().flatten())
}

/// The user every container of `pod` runs as, when they share one (Kubernetes' `FsUserFrom`):
/// a projected token is then that user's alone.
fn fs_user(pod: &k8s_openapi::api::core::v1::Pod) -> Option<u32> {
    let spec = pod.spec.as_ref()?;
    let pod_user = spec.security_context.as_ref().and_then(|c| c.run_as_user);
    let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
    let mut users =
        containers.map(|c| c.security_context.as_ref().and_then(|c| c.run_as_user).or(pod_user));
    let first = users.next()??;
    users.all(|user| user == Some(first)).then_some(first).and_then(|u| u32::try_from(u).ok())
}

/// What the node does with a volume.
enum Kind {
    EmptyDir,
    /// Files the node writes: a ConfigMap's, a Secret's, the downward API's, or a mix.
    Files,
    HostPath,
    Claim,
    /// A kind this node cannot mount (its field's name).
    Other(String),
}

fn kind(volume: &Volume) -> Kind {
    let v = volume;
    if v.empty_dir.is_some() {
        Kind::EmptyDir
    } else if v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
        || v.projected.is_some()
    {
        Kind::Files
    } else if v.host_path.is_some() {
        Kind::HostPath
    } else if v.persistent_volume_claim.is_some() {
        Kind::Claim
    } else {
        // Named as the pod's spec names the source.
        let value = serde_json::to_value(v).unwrap_or_default();
        let mut named = value.as_object().into_iter().flatten().map(|(k, _)| k.as_str());
        Kind::Other(named.find(|k| *k != "name").unwrap_or("unknown").to_string())
    }
}

/// An `emptyDir`: a directory every container's user may write (0777, as the kubelet makes it).
fn make_shared_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

/// Gives what is under `dir` (itself too) to the pod's `fsGroup`, as the kubelet's
/// `SetVolumeOwnership` does: each entry becomes the group's (a link itself, not what it points
/// at), each file readable by the group (and writable unless `read_only`), each directory also
/// searchable and set-group-ID, so that what is made in it is the group's as well.
fn give_to_group(dir: &Path, group: u32, read_only: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir)?;
    std::os::unix::fs::lchown(dir, None, Some(group))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mut mask = if read_only { 0o440 } else { 0o660 };
    if meta.is_dir() {
        mask |= 0o2110;
        for entry in std::fs::read_dir(dir)? {
            give_to_group(&entry?.path(), group, read_only)?;
        }
    }
    let mode = meta.permissions().mode() & 0o7777;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | mask))
}

/// The files of a ConfigMap, Secret, downward API or projected volume.
async fn payload(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    volume: &Volume,
    dir: &Path,
    private_token: bool,
) -> Result<Payload, String> {
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut payload = Payload::new();
    if let Some(source) = &volume.config_map {
        let mode = mode_or(source.default_mode, DEFAULT_MODE);
        let object = Object::ConfigMap(&source.name, source.optional.unwrap_or(false));
        object.add(client, namespace, source.items.as_deref(), mode, &mut payload).await?;
    }
    if let Some(source) = &volume.secret {
        let mode = mode_or(source.default_mode, DEFAULT_MODE);
        let name = source.secret_name.as_deref().unwrap_or("");
        let object = Object::Secret(name, source.optional.unwrap_or(false));
        object.add(client, namespace, source.items.as_deref(), mode, &mut payload).await?;
    }
    if let Some(source) = &volume.downward_api {
        let mode = mode_or(source.default_mode, DEFAULT_MODE);
        downward(client, ctx, source.items.as_deref().unwrap_or(&[]), mode, &mut payload).await?;
    }
    if let Some(source) = &volume.projected {
        let mode = mode_or(source.default_mode, DEFAULT_MODE);
        for projection in source.sources.iter().flatten() {
            if let Some(source) = &projection.config_map {
                let object = Object::ConfigMap(&source.name, source.optional.unwrap_or(false));
                object.add(client, namespace, source.items.as_deref(), mode, &mut payload).await?;
            }
            if let Some(source) = &projection.secret {
                let object = Object::Secret(&source.name, source.optional.unwrap_or(false));
                object.add(client, namespace, source.items.as_deref(), mode, &mut payload).await?;
            }
            if let Some(source) = &projection.downward_api {
                let items = source.items.as_deref().unwrap_or(&[]);
                downward(client, ctx, items, mode, &mut payload).await?;
            }
            if let Some(source) = &projection.service_account_token {
                let token = tokens::token(client, ctx, source, &dir.join(&source.path)).await?;
                let mode = if private_token { 0o600 } else { mode };
                payload.insert(source.path.clone(), File { bytes: token.into_bytes(), mode });
            }
        }
    }
    Ok(payload)
}

fn mode_or(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default)
}

/// A ConfigMap or a Secret a volume draws on: its name and whether it may be missing.
enum Object<'a> {
    ConfigMap(&'a str, bool),
    Secret(&'a str, bool),
}

impl Object<'_> {
    /// Adds the object's keys (or the `items` it names, at their paths) to `payload`.
    async fn add(
        &self,
        client: &dyn ApiClient,
        namespace: &str,
        items: Option<&[KeyToPath]>,
        mode: u32,
        payload: &mut Payload,
    ) -> Result<(), String> {
        let (plural, name, optional, missing_key) = match *self {
            Object::ConfigMap(name, optional) => {
                ("configmaps", name, optional, "configmap references non-existent config key")
            }
            Object::Secret(name, optional) => {
                ("secrets", name, optional, "references non-existent secret key")
            }
        };
        let found = launch::source_object(client, plural, namespace, name, optional).await;
        let Some(object) = found.map_err(LaunchError::message)? else { return Ok(()) };
        let keys = keys(&object, plural == "secrets");
        match items {
            None => {
                for (key, bytes) in keys {
                    payload.insert(key, File { bytes, mode });
                }
            }
            Some(items) => {
                for item in items {
                    let Some(bytes) = keys.get(&item.key) else {
                        if optional {
                            continue;
                        }
                        // The kubelet's words.
                        return Err(format!("{missing_key}: {}", item.key));
                    };
                    let file = File { bytes: bytes.clone(), mode: mode_or(item.mode, mode) };
                    payload.insert(item.path.clone(), file);
                }
            }
        }
        Ok(())
    }
}

/// A ConfigMap's `data` and `binaryData`, or a Secret's `data`, as bytes by key.
fn keys(object: &Value, secret: bool) -> BTreeMap<String, Vec<u8>> {
    let decode = |text: &str| base64::engine::general_purpose::STANDARD.decode(text).ok();
    let field = |name: &str| object.get(name).and_then(Value::as_object).into_iter().flatten();
    let mut keys = BTreeMap::new();
    for (key, value) in field("data") {
        let Some(text) = value.as_str() else { continue };
        let bytes = if secret { decode(text) } else { Some(text.as_bytes().to_vec()) };
        if let Some(bytes) = bytes {
            keys.insert(key.clone(), bytes);
        }
    }
    if !secret {
        for (key, value) in field("binaryData") {
            if let Some(bytes) = value.as_str().and_then(decode) {
                keys.insert(key.clone(), bytes);
            }
        }
    }
    keys
}

/// Adds the downward API `items` (fields of the pod, resources of its containers).
async fn downward(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    payload: &mut Payload,
) -> Result<(), String> {
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            launch::field_value(ctx, &field.field_path).map_err(LaunchError::message)?
        } else if let Some(field) = &item.resource_field_ref {
            // A volume's resource names its container (validation requires it).
            let value = launch::resource_value(client, ctx, None, field).await;
            value.map_err(LaunchError::message)?
        } else {
            continue;
        };
        let file = File { bytes: value.into_bytes(), mode: mode_or(item.mode, mode) };
        payload.insert(item.path.clone(), file);
    }
    Ok(())
}

/// Checks (or makes) a `hostPath` as its `type` asks, in the kubelet's words.
fn check_host_path(path: &Path, kind: &str) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    let metadata = std::fs::metadata(path);
    let is = |test: fn(&std::fs::Metadata) -> bool| metadata.as_ref().is_ok_and(test);
    let failed = |what: &str| Err(format!("hostPath type check failed: {shown} is not a {what}"));
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" if metadata.is_err() => {
            create_host_dir(path).map_err(|e| format!("mkdir {shown}: {e}"))
        }
        "DirectoryOrCreate" | "Directory" if is(std::fs::Metadata::is_dir) => Ok(()),
        "DirectoryOrCreate" | "Directory" => failed("directory"),
        "FileOrCreate" if metadata.is_err() => create_host_file(path).map_err(|e| e.to_string()),
        "FileOrCreate" | "File" if is(std::fs::Metadata::is_file) => Ok(()),
        "FileOrCreate" | "File" => failed("file"),
        "Socket" if is(|m| m.file_type().is_socket()) => Ok(()),
        "Socket" => failed("socket file"),
        "CharDevice" if is(|m| m.file_type().is_char_device()) => Ok(()),
        "CharDevice" => failed("character device"),
        "BlockDevice" if is(|m| m.file_type().is_block_device()) => Ok(()),
        "BlockDevice" => failed("block device"),
        other => Err(format!("invalid HostPathType {other:?}")),
    }
}

/// A `DirectoryOrCreate` path: made with its parents, 0755.
fn create_host_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(path)
}

/// A `FileOrCreate` path: an empty 0644 file (its parent must exist, as with the kubelet).
fn create_host_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).append(true).mode(0o644).open(path).map(|_| ())
}

/// The node path of the volume the claim `name` of the pod's namespace is bound to.
async fn claimed_path(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    name: &str,
) -> Result<PathBuf, String> {
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    let claims = resources::core("persistentvolumeclaims");
    let claim = client.get(claims, namespace, name).await.map_err(|e| match e {
        ApiError::NotFound { .. } => format!("persistentvolumeclaim {name:?} not found"),
        e => e.to_string(),
    })?;
    let claim: PersistentVolumeClaim = serde_json::from_value(claim).map_err(|e| e.to_string())?;
    let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
    if volume_name.is_empty() {
        return Err(format!("persistentvolumeclaim {name:?} is not bound"));
    }
    let volumes = resources::core("persistentvolumes");
    let volume = client.get(volumes, "", &volume_name).await.map_err(|e| e.to_string())?;
    let volume: PersistentVolume = serde_json::from_value(volume).map_err(|e| e.to_string())?;
    let spec = volume.spec.as_ref();
    let path = spec
        .and_then(|s| s.host_path.as_ref().map(|h| h.path.clone()))
        .or_else(|| spec.and_then(|s| s.local.as_ref().map(|l| l.path.clone())));
    let path = path.ok_or_else(|| {
        format!(
            "persistentvolume {volume_name:?} is neither hostPath nor local: not mountable here"
        )
    })?;
    let path = PathBuf::from(path);
    // A hostPath volume's type is checked (or the directory made) as a pod's would be.
    let kind = spec.and_then(|s| s.host_path.as_ref()).and_then(|h| h.type_.clone());
    check_host_path(&path, kind.as_deref().unwrap_or(""))?;
    Ok(path)
}

/// The binds of `container`'s `volumeMounts`: each volume set up (or the `subPath` in it, made
/// when missing, as the kubelet makes it; `subPathExpr` expanded with the container's `env`),
/// read-only when the mount or the volume says so. Mounts of volumes not set up are left out.
pub fn mounts(
    container: &Container,
    volumes: &Volumes,
    env: &[(String, String)],
) -> Result<Vec<Mount>, LaunchError> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let Some(volume) = volumes.set_up.get(&mount.name) else { continue };
        let sub_path = match (&mount.sub_path, &mount.sub_path_expr) {
            (Some(path), _) if !path.is_empty() => Some(path.clone()),
            (_, Some(expr)) if !expr.is_empty() => Some(launch::expand_sub_path(expr, env)?),
            _ => None,
        };
        let source = match sub_path {
            Some(path) => {
                let source = volume.path.join(&path);
                // Only within the volume (validation refuses these; an expansion may not), in
                // the kubelet's words.
                if Path::new(&path).is_absolute() {
                    let message = format!("error SubPath `{path}` must not be an absolute path");
                    return Err(LaunchError::Config(message));
                }
                if Path::new(&path).components().any(|c| c == std::path::Component::ParentDir) {
                    let message =
                        format!("unable to provision SubPath `{path}`: must not contain '..'");
                    return Err(LaunchError::Config(message));
                }
                if std::fs::symlink_metadata(&source).is_err() {
                    std::fs::create_dir_all(&source).map_err(|e| {
                        LaunchError::Config(format!("failed to create subPath directory: {e}"))
                    })?;
                }
                source
            }
            None => volume.path.clone(),
        };
        mounts.push(Mount {
            source,
            target: PathBuf::from(&mount.mount_path),
            read_only: volume.read_only || mount.read_only.unwrap_or(false),
        });
    }
    // Outer paths first, so that a mount inside another volume lands on it.
    mounts.sort_by_key(|m| m.target.components().count());
    Ok(mounts)
}

#[cfg(test)]
mod tests;
