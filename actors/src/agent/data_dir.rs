//! An agent's hold on its data dir: locked for as long as the agent runs (another agent given
//! the same dir would sweep this one's containers as orphans), and the agent's name of its own,
//! made once and kept there, so that a restarted agent is known as the same one (see
//! [`super::node_lease`]).

use std::fs::{File, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "agent.lock";
const IDENTITY_FILE: &str = "agent-id";

/// Why an agent could not take its data dir.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("the agent's data dir {} is in use by another agent", .0.display())]
    InUse(PathBuf),
    #[error("the agent's data dir {}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// A data dir this agent holds: locked until this is dropped (or the process ends).
#[derive(Debug)]
pub struct DataDirClaim {
    _lock: File,
    identity: String,
}

impl DataDirClaim {
    /// Locks `dir` (made when missing) and reads the agent's name there, making it the first
    /// time; `InUse` while another process holds it.
    pub fn take(dir: &Path) -> Result<Self, ClaimError> {
        let io_error = |source| ClaimError::Io { path: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(io_error)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(ClaimError::InUse(dir.to_path_buf())),
            Err(TryLockError::Error(source)) => return Err(io_error(source)),
        }
        let identity = identity(dir).map_err(io_error)?;
        Ok(Self { _lock: lock, identity })
    }

    /// The agent's name, the same across its restarts.
    pub fn identity(&self) -> &str {
        &self.identity
    }
}

/// The name kept in `dir`, made (and written whole, synced) when there is none.
fn identity(dir: &Path) -> io::Result<String> {
    let path = dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(kept) if !kept.trim().is_empty() => return Ok(kept.trim().to_string()),
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let made = crate::core::new_uid();
    let partial = dir.join(format!("{IDENTITY_FILE}.partial"));
    let mut file = File::create(&partial)?;
    file.write_all(made.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, &path)?;
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_is_held_by_one_agent_at_a_time_and_keeps_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent").join("n1");
        let first = DataDirClaim::take(&agent).unwrap();
        assert!(matches!(DataDirClaim::take(&agent), Err(ClaimError::InUse(_))));
        let name = first.identity().to_string();
        drop(first);
        let again = DataDirClaim::take(&agent).unwrap();
        assert_eq!(again.identity(), name, "a restarted agent is the same agent");
        let other = DataDirClaim::take(&dir.path().join("other")).unwrap();
        assert_ne!(other.identity(), name);
    }
}
