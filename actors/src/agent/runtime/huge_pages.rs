//! Transparent huge pages: the server turns them off for its own process, and the processes
//! its node agent starts get them as the server itself was started with. The setting belongs
//! to the whole process and the kernel hands it to every process started from it (across fork
//! and exec), so a container would otherwise run with the server's tuning, not the host's.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use nix::sys::prctl;
use tokio::process::{Child, Command};

/// Set once this process has turned off the huge pages it was started with.
static GIVE_BACK_TO_CHILDREN: AtomicBool = AtomicBool::new(false);
/// Processes are started one at a time while huge pages are given back.
static STARTING: Mutex<()> = Mutex::new(());

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`). Processes
/// started afterwards through [`spawn`] still get them, if this process had them.
pub fn turn_off_for_this_process() -> nix::Result<()> {
    let already_off = prctl::get_thp_disable()?;
    prctl::set_thp_disable(true)?;
    if !already_off {
        GIVE_BACK_TO_CHILDREN.store(true, Ordering::Release);
    }
    Ok(())
}

/// Spawns `command` so that its process gets transparent huge pages as this one was started
/// with: how every process the agent starts is spawned. While it spawns, this process has them
/// too: a spawn takes well under a millisecond, and a container start is rare next to the
/// server's own work.
pub fn spawn(command: &mut Command) -> io::Result<Child> {
    if !GIVE_BACK_TO_CHILDREN.load(Ordering::Acquire) {
        return command.spawn();
    }
    // One at a time: a spawn that ended must not take them away from one still starting.
    let _one_at_a_time = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = prctl::set_thp_disable(false);
    // Dropped before the lock, even if the spawn panics.
    let _off_again = OffAgain;
    command.spawn()
}

/// Turns huge pages off for this process again when dropped.
struct OffAgain;

impl Drop for OffAgain {
    fn drop(&mut self) {
        let _ = prctl::set_thp_disable(true);
    }
}
