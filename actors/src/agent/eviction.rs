//! Local storage eviction, as the kubelet's eviction manager does it for each pod: a pod whose
//! `emptyDir` holds more than its `sizeLimit`, whose use of the node's disk passes the sum of
//! its containers' `ephemeral-storage` limits, or one of whose containers passes its own, is
//! evicted (stopped at once, `Failed`, reason `Evicted`), in the kubelet's words. Here a
//! container has no writable layer of its own (it writes to the node's file system), so what
//! it uses is its log files; a pod's use is that and its `emptyDir` volumes'.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::model::quantity;

/// How often a pod's storage is measured (the eviction manager's monitoring interval).
pub const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the kubelet would evict `pod`, whose files are under `pod_dir`, for its local storage:
/// the status message, or `None` while it keeps within its limits. `size_of` measures a
/// directory (the bytes of its files).
pub fn storage_violation(
    pod: &Pod,
    pod_dir: &Path,
    size_of: &dyn Fn(&Path) -> u64,
) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let mut pod_usage = 0u64;
    for volume in spec.volumes.iter().flatten() {
        let Some(empty_dir) = &volume.empty_dir else { continue };
        if empty_dir.medium.as_deref() == Some("Memory") {
            continue;
        }
        let used = size_of(&super::volumes::own_dir(pod_dir, &volume.name));
        pod_usage += used;
        if let Some(limit) = empty_dir.size_limit.as_ref().filter(|l| exceeds(used, l)) {
            return Some(format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                volume.name, limit.0
            ));
        }
    }
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    let used_by: BTreeMap<&str, u64> =
        containers.map(|c| (c.name.as_str(), size_of(&pod_dir.join(&c.name)))).collect();
    pod_usage += used_by.values().sum::<u64>();
    if let Some(limit) = pod_limit(&spec.containers, spec.init_containers.as_deref()) {
        if pod_usage > limit {
            let limit = quantity::from_millis(i128::from(limit) * 1000, true);
            return Some(format!(
                "Pod ephemeral local storage usage exceeds the total limit of containers {limit}. "
            ));
        }
    }
    for container in &spec.containers {
        let used = used_by.get(container.name.as_str()).copied().unwrap_or(0);
        if let Some(limit) = storage_limit(container).filter(|l| exceeds(used, l)) {
            return Some(format!(
                "Container {} exceeded its local ephemeral storage limit {:?}. ",
                container.name, limit.0
            ));
        }
    }
    None
}

fn storage_limit(container: &Container) -> Option<&Quantity> {
    container.resources.as_ref()?.limits.as_ref()?.get("ephemeral-storage")
}

fn bytes(limit: &Quantity) -> Option<u64> {
    quantity::value(&limit.0).ok().and_then(|v| u64::try_from(v).ok())
}

fn exceeds(used: u64, limit: &Quantity) -> bool {
    bytes(limit).is_some_and(|limit| used > limit)
}

/// The pod's `ephemeral-storage` limit, as Kubernetes' `PodLimits` sums it: its app
/// containers' limits, or an init container's when larger; `None` when none has one.
fn pod_limit(containers: &[Container], init: Option<&[Container]>) -> Option<u64> {
    let limits = |list: &[Container]| -> Vec<u64> {
        list.iter().filter_map(storage_limit).filter_map(bytes).collect()
    };
    let apps = limits(containers);
    let inits = limits(init.unwrap_or_default());
    if apps.is_empty() && inits.is_empty() {
        return None;
    }
    let sum: u64 = apps.iter().sum();
    Some(inits.into_iter().fold(sum, u64::max))
}

/// The bytes of the files under `dir` (not following links), 0 when it is not there. Each
/// directory is opened from its parent's handle, never by a path, so a tree deeper than the
/// longest path the kernel takes (4 KiB) is measured whole instead of ending where its paths
/// grow too long; one handle is open a level of the directory being read.
pub fn disk_usage(dir: &Path) -> u64 {
    use rustix::fs::{openat, statat, AtFlags, Dir, FileType, Mode, OFlags, CWD};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(root) = openat(CWD, dir, flags, Mode::empty()).and_then(Dir::new) else { return 0 };
    let mut levels = vec![root];
    let mut total = 0u64;
    while let Some(level) = levels.last_mut() {
        let Some(Ok(entry)) = level.next() else {
            levels.pop();
            continue;
        };
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let Ok(fd) = level.fd() else { continue };
        let Ok(stat) = statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            total = total.saturating_add(u64::try_from(stat.st_size).unwrap_or(0));
            continue;
        }
        if let Ok(below) = openat(fd, name, flags, Mode::empty()).and_then(Dir::new) {
            levels.push(below);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn the_first_limit_passed_is_named_in_the_kubelets_words() {
        let dir = Path::new("/pod");
        let sizes = |used: &'static [(&'static str, u64)]| {
            move |path: &Path| {
                used.iter().find(|(p, _)| path == Path::new(p)).map_or(0, |(_, bytes)| *bytes)
            }
        };
        let spec = json!({"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Mi"}}],
            "containers": [{"name": "c", "image": "i",
                "resources": {"limits": {"ephemeral-storage": "2Mi"}}}]});
        let limited = pod(spec);
        assert_eq!(storage_violation(&limited, dir, &sizes(&[("/pod/volumes/v", 1 << 20)])), None);
        assert_eq!(
            storage_violation(&limited, dir, &sizes(&[("/pod/volumes/v", 20 << 20)])).unwrap(),
            "Usage of EmptyDir volume \"v\" exceeds the limit \"1Mi\". "
        );
        // The volume within its limit, the pod past the containers' total.
        let both = sizes(&[("/pod/volumes/v", 1 << 20), ("/pod/c", (1 << 20) + 1)]);
        assert_eq!(
            storage_violation(&limited, dir, &both).unwrap(),
            "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
        );
        // A container past its own limit, the pod's total larger (another container's).
        let two = pod(json!({"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"ephemeral-storage": "1Mi"}}},
            {"name": "d", "image": "i", "resources": {"limits": {"ephemeral-storage": "10Mi"}}}]}));
        assert_eq!(
            storage_violation(&two, dir, &sizes(&[("/pod/c", 2 << 20)])).unwrap(),
            "Container c exceeded its local ephemeral storage limit \"1Mi\". "
        );
        let unlimited = pod(json!({"volumes": [{"name": "v", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i"}]}));
        assert_eq!(
            storage_violation(&unlimited, dir, &sizes(&[("/pod/volumes/v", 1 << 40)])),
            None
        );
    }

    #[test]
    fn disk_usage_counts_the_files_of_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        std::fs::write(dir.path().join("sub/b"), [0u8; 50]).unwrap();
        assert_eq!(disk_usage(dir.path()), 150);
        assert_eq!(disk_usage(&dir.path().join("none")), 0);
        // A link is counted as itself, not as what it points at.
        std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("link")).unwrap();
        let link = std::fs::symlink_metadata(dir.path().join("link")).unwrap().len();
        assert_eq!(disk_usage(dir.path()), 150 + link);
    }

    /// Files below paths longer than the kernel takes (4 KiB) count too: a pod could hide its
    /// data from its limits there.
    #[test]
    fn disk_usage_counts_files_deeper_than_the_longest_path() {
        use rustix::fs::{mkdirat, openat, Mode, OFlags};
        let dir = tempfile::tempdir().unwrap();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut fd = openat(rustix::fs::CWD, dir.path(), flags, Mode::empty()).unwrap();
        for _ in 0..1500 {
            mkdirat(&fd, "abcd", Mode::RWXU).unwrap();
            fd = openat(&fd, "abcd", flags, Mode::empty()).unwrap();
        }
        let file = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
        let deep = openat(&fd, "deep", file, Mode::RUSR | Mode::WUSR).unwrap();
        rustix::io::write(&deep, &[7u8; 1000]).unwrap();
        assert_eq!(disk_usage(dir.path()), 1000);
    }
}
