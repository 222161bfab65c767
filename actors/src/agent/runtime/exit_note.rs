//! A container's exit note: how its run ended, written by its first process (`kplane
//! exec-limited --exit-file`, which runs the container's command as its child and outlives it)
//! for an agent that is not that process's parent: one that restarted and adopted the
//! container, as a container shim keeps the exit status across kubelet restarts.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What the note says: the container's first process, and the code its command ended with
/// (128 + the signal that killed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitNote {
    pub pid: u32,
    pub exit_code: i32,
}

impl ExitNote {
    /// Where the note of a container whose files are under `container_dir` is kept.
    pub fn path(container_dir: &Path) -> PathBuf {
        container_dir.join("exit.json")
    }

    /// Writes the note whole (to a file beside `path`, then renamed over it), so that a reader
    /// finds either none or all of it.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        drop(file);
        std::fs::rename(&partial, path)
    }

    /// The code the run of first process `pid` ended with, when its note is there.
    pub fn read(path: &Path, pid: u32) -> Option<i32> {
        let bytes = std::fs::read(path).ok()?;
        let note: ExitNote = serde_json::from_slice(&bytes).ok()?;
        (note.pid == pid).then_some(note.exit_code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_read_back_for_its_own_process_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = ExitNote::path(dir.path());
        assert_eq!(ExitNote::read(&path, 42), None, "no note yet");
        ExitNote { pid: 42, exit_code: 3 }.write(&path).unwrap();
        assert_eq!(ExitNote::read(&path, 42), Some(3));
        assert_eq!(ExitNote::read(&path, 43), None, "another run's");
        ExitNote { pid: 43, exit_code: 0 }.write(&path).unwrap();
        assert_eq!(ExitNote::read(&path, 43), Some(0), "a later run's replaces it");
        std::fs::write(&path, b"{\"pid\": 43").unwrap();
        assert_eq!(ExitNote::read(&path, 43), None, "a damaged note is none");
    }
}
