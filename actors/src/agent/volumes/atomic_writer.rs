//! Writes a volume's files the way the kubelet's atomic writer lays them out, so that an update
//! (a ConfigMap changed) is seen all at once or not at all: the files live in a directory named
//! for the time they were written (`..2026_12_06_10_00_00.123456789`), `..data` is a symlink to
//! it, and each top-level name is a symlink through `..data`. An update writes a new directory,
//! swaps `..data` with one rename, then tidies the names and removes the old directory.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The symlink to the directory of the current files.
const DATA: &str = "..data";
/// The symlink made beside `..data`, then renamed over it.
const DATA_TMP: &str = "..data_tmp";

/// A file of a volume: its bytes and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Relative path (`key`, or `dir/key` from an item's `path`) -> file.
pub type Payload = BTreeMap<String, File>;

/// Makes `dir` hold exactly `payload`; false when it already did (nothing written).
pub fn write(dir: &Path, payload: &Payload) -> io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    let current = std::fs::read_link(dir.join(DATA)).ok();
    if let Some(current) = &current {
        if holds(&dir.join(current), payload) {
            return Ok(false);
        }
    }
    let stamp = chrono::Utc::now().format("..%Y_%m_%d_%H_%M_%S.%f").to_string();
    let fresh = dir.join(&stamp);
    std::fs::create_dir(&fresh)?;
    for (path, file) in payload {
        let target = fresh.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &file.bytes)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file.mode))?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    let names = top_level(payload);
    for name in &names {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if is_link && !name.starts_with("..") && !names.contains(&name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(old) = current.filter(|old| old.as_path() != Path::new(&stamp)) {
        std::fs::remove_dir_all(dir.join(old))?;
    }
    Ok(true)
}

/// The first component of each path: what the volume's top level shows.
fn top_level(payload: &Payload) -> BTreeSet<String> {
    let first = |path: &String| path.split('/').next().unwrap_or(path).to_string();
    payload.keys().map(first).collect()
}

/// Whether `files` (a written directory) holds `payload` and nothing else.
fn holds(files: &Path, payload: &Payload) -> bool {
    let mut found = Vec::new();
    if walk(files, files, &mut found).is_err() || found.len() != payload.len() {
        return false;
    }
    found.iter().all(|path| {
        let Some(file) = payload.get(path) else { return false };
        let target = files.join(path);
        let same_mode = std::fs::metadata(&target)
            .is_ok_and(|m| m.permissions().mode() & 0o7777 == file.mode & 0o7777);
        same_mode && std::fs::read(&target).is_ok_and(|bytes| bytes == file.bytes)
    })
}

/// The regular files under `dir`, as paths relative to `root`.
fn walk(root: &Path, dir: &Path, found: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            walk(root, &entry.path(), found)?;
        } else if let Ok(relative) = entry.path().strip_prefix(root) {
            found.push(relative.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(files: &[(&str, &str, u32)]) -> Payload {
        let file = |bytes: &str, mode| File { bytes: bytes.as_bytes().to_vec(), mode };
        files.iter().map(|(path, bytes, mode)| (path.to_string(), file(bytes, *mode))).collect()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("..2"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn files_are_reached_through_the_data_link_and_an_update_swaps_them() {
        let dir = tempfile::tempdir().unwrap();
        let first = payload(&[("a", "1", 0o644), ("sub/b", "2", 0o400)]);
        assert!(write(dir.path(), &first).unwrap());
        assert_eq!(names(dir.path()), ["..data", "a", "sub"]);
        assert_eq!(std::fs::read_to_string(dir.path().join("sub/b")).unwrap(), "2");
        assert_eq!(std::fs::read_link(dir.path().join("a")).unwrap(), Path::new("..data/a"));
        let mode = std::fs::metadata(dir.path().join("sub/b")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        // The same files again: nothing is written.
        let before = std::fs::read_link(dir.path().join(DATA)).unwrap();
        assert!(!write(dir.path(), &first).unwrap());
        assert_eq!(std::fs::read_link(dir.path().join(DATA)).unwrap(), before);
        // A changed value, a key gone and a new one.
        let second = payload(&[("a", "one", 0o644), ("c", "3", 0o644)]);
        assert!(write(dir.path(), &second).unwrap());
        assert_eq!(names(dir.path()), ["..data", "a", "c"]);
        assert_eq!(std::fs::read_to_string(dir.path().join("a")).unwrap(), "one");
        assert!(!dir.path().join(&before).exists(), "the old files are removed");
        // A changed mode alone is an update too.
        let third = payload(&[("a", "one", 0o600), ("c", "3", 0o644)]);
        assert!(write(dir.path(), &third).unwrap());
        // Nothing at all: the volume is empty but for the link.
        assert!(write(dir.path(), &Payload::new()).unwrap());
        assert_eq!(names(dir.path()), ["..data"]);
    }
}
