//! A container's exit note: how its run ended, written by its first process (`kplane
//! exec-limited --exit-file`, which runs the container's command as its child and outlives it)
//! for an agent that is not that process's parent: one that restarted and adopted the
//! container, as a container shim keeps the exit status across kubelet restarts.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What the note says: the container's first process, the code its command ended with (128 +
/// the signal that killed it) and when (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitNote {
    pub pid: u32,
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl ExitNote {
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

    /// The note of the run of first process `pid`, when it is there.
    pub fn read(path: &Path, pid: u32) -> Option<ExitNote> {
        let bytes = std::fs::read(path).ok()?;
        let note: ExitNote = serde_json::from_slice(&bytes).ok()?;
        (note.pid == pid).then_some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_read_back_for_its_own_process_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit.json");
        assert_eq!(ExitNote::read(&path, 42), None, "no note yet");
        let at = Some("2026-12-07T13:10:18Z".to_string());
        let note = ExitNote { pid: 42, exit_code: 3, finished_at: at };
        note.write(&path).unwrap();
        assert_eq!(ExitNote::read(&path, 42), Some(note));
        assert_eq!(ExitNote::read(&path, 43), None, "another run's");
        std::fs::write(&path, br#"{"pid": 43, "exitCode": 0}"#).unwrap();
        let untimed = ExitNote { pid: 43, exit_code: 0, finished_at: None };
        assert_eq!(ExitNote::read(&path, 43), Some(untimed), "a later run's replaces it");
        std::fs::write(&path, b"{\"pid\": 43").unwrap();
        assert_eq!(ExitNote::read(&path, 43), None, "a damaged note is none");
    }
}
