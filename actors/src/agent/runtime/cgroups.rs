//! Control groups for the process runtime (cgroup v1's `memory` and `cpu` controllers, as
//! Debian's and this machine's kernels mount them): each container's processes in a group of
//! their own, `kplane/pod<uid>/<container>`, as the kubelet puts them in `kubepods/pod<uid>/`.
//! The group holds the container's memory limit (the kernel's OOM killer ends the container
//! past it, reported `OOMKilled`), its CPU limit (a CFS quota) and request (its shares), and
//! finds every process the container started, also those that left its process group and
//! session (`setsid`, daemons), so that they end with it.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::Resources;

/// The group every container's group is made under, in each hierarchy.
const PARENT: &str = "kplane";
/// The CFS period the quota is a share of (the kernel's default, as the kubelet uses it).
const CFS_PERIOD_US: u64 = 100_000;
/// The smallest quota the kubelet sets (1 ms a period).
const MIN_CFS_QUOTA_US: u64 = 1_000;
/// The fewest shares the kernel accepts (the kubelet's for a container without a request).
const MIN_SHARES: u64 = 2;
/// How old an empty group must be to count as left behind by an agent no longer running.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);
/// How long the processes of an ended container get to die once killed.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The hierarchies this process can make groups in: `memory` (required) and `cpu`.
#[derive(Debug, Clone)]
pub struct Cgroups {
    memory: PathBuf,
    cpu: Option<PathBuf>,
}

impl Cgroups {
    /// The groups under `mount` (`/sys/fs/cgroup`) where this process may make them (as
    /// root, on a cgroup v1 `memory` controller); `None` elsewhere: then containers get
    /// per-process limits instead (see `kplane exec-limited`).
    pub fn detect(mount: &Path) -> Option<Self> {
        let usable = |controller: &str, probe: &str| {
            let parent = mount.join(controller).join(PARENT);
            let root_has_it = mount.join(controller).join(probe).is_file();
            (root_has_it && std::fs::create_dir_all(&parent).is_ok() && writable(&parent))
                .then_some(parent)
        };
        let memory = usable("memory", "memory.limit_in_bytes")?;
        let cpu = usable("cpu", "cpu.cfs_quota_us");
        if let Some(cpu) = &cpu {
            // All containers with CPU resources weigh as much as the machine's cores against
            // the node's other processes (the kubelet gives `kubepods` its allocatable CPU).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
            let _ = std::fs::write(cpu.join("cpu.shares"), (1024 * cores).to_string());
        }
        for parent in std::iter::once(&memory).chain(&cpu) {
            remove_abandoned(parent);
        }
        Some(Self { memory, cpu })
    }

    /// The group `name` (`pod<uid>/<container>`) for a run with `resources`, made or taken
    /// over: what a run before it left in it is killed first.
    pub fn create(&self, name: &str, resources: &Resources) -> io::Result<ContainerCgroup> {
        let memory = self.memory.join(name);
        make(&memory)?;
        let cpu_wanted =
            resources.cpu_limit_millis.is_some() || resources.cpu_request_millis.is_some();
        let cpu = match (&self.cpu, cpu_wanted) {
            (Some(parent), true) => {
                let dir = parent.join(name);
                make(&dir)?;
                Some(dir)
            }
            _ => None,
        };
        let mut group = ContainerCgroup { memory, cpu, oom_kills_before: 0 };
        group.kill_now();
        let limit = resources.memory_limit.map_or("-1".to_string(), |bytes| bytes.to_string());
        write(&group.memory, "memory.limit_in_bytes", &limit)?;
        if let Some(cpu) = &group.cpu {
            let quota = resources.cpu_limit_millis.map_or("-1".to_string(), |m| {
                (m * CFS_PERIOD_US / 1000).max(MIN_CFS_QUOTA_US).to_string()
            });
            write(cpu, "cpu.cfs_period_us", &CFS_PERIOD_US.to_string())?;
            write(cpu, "cpu.cfs_quota_us", &quota)?;
            let request = resources.cpu_request_millis.or(resources.cpu_limit_millis).unwrap_or(0);
            write(cpu, "cpu.shares", &(request * 1024 / 1000).max(MIN_SHARES).to_string())?;
        }
        group.oom_kills_before = group.oom_kills();
        Ok(group)
    }

    /// The group `name` of a container started before this agent did (adopted), as it is:
    /// the OOM kills it has seen are its run's (each run has a group of its own).
    pub fn existing(&self, name: &str) -> Option<ContainerCgroup> {
        let memory = self.memory.join(name);
        if !memory.is_dir() {
            return None;
        }
        let cpu = self.cpu.as_ref().map(|parent| parent.join(name)).filter(|dir| dir.is_dir());
        Some(ContainerCgroup { memory, cpu, oom_kills_before: 0 })
    }
}

/// One container's group.
#[derive(Debug)]
pub struct ContainerCgroup {
    memory: PathBuf,
    cpu: Option<PathBuf>,
    /// The kernel's count of OOM kills in the group when the run started.
    oom_kills_before: u64,
}

impl ContainerCgroup {
    /// The files a process writes `0` into to join the group (each hierarchy's): what the
    /// runtime's launcher is given (`kplane exec-limited --cgroup-procs FILE`).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        let dirs = std::iter::once(&self.memory).chain(&self.cpu);
        dirs.map(|dir| dir.join("cgroup.procs")).collect()
    }

    /// The processes in the group.
    pub fn processes(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.memory.join("cgroup.procs")).unwrap_or_default();
        text.lines().filter_map(|line| line.trim().parse().ok()).collect()
    }

    /// SIGKILLs every process in the group, once.
    pub fn kill_now(&self) {
        for pid in self.processes() {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }

    /// Kills every process in the group until none is left (a process may fork as it is
    /// killed), waiting up to a few seconds for the kernel to take them out.
    pub async fn kill_all(&self) {
        let deadline = tokio::time::Instant::now() + KILL_WAIT;
        loop {
            if self.processes().is_empty() {
                return;
            }
            self.kill_now();
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(group = %self.memory.display(), "processes left after SIGKILL");
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether the kernel's OOM killer has killed a process of the group since its run
    /// started.
    pub fn oom_killed(&self) -> bool {
        self.oom_kills() > self.oom_kills_before
    }

    fn oom_kills(&self) -> u64 {
        let text =
            std::fs::read_to_string(self.memory.join("memory.oom_control")).unwrap_or_default();
        let count = text.lines().find_map(|line| line.strip_prefix("oom_kill "));
        count.and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }

    /// Removes the group, and its pod's when that is empty too. While the kernel finds the
    /// group busy (a process was joining it as it was emptied, an exec probe's, or one dying
    /// is not out yet), what is in it is killed again and the removal tried again, for a few
    /// seconds at most.
    pub async fn remove(&self) {
        for dir in std::iter::once(&self.memory).chain(&self.cpu) {
            let deadline = tokio::time::Instant::now() + KILL_WAIT;
            let mut pause = Duration::from_millis(5);
            while is_busy(std::fs::remove_dir(dir)) {
                if tokio::time::Instant::now() >= deadline {
                    tracing::warn!(group = %dir.display(), "a control group stayed busy");
                    break;
                }
                self.kill_now();
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            if let Some(pod) = dir.parent() {
                let _ = std::fs::remove_dir(pod);
            }
        }
    }
}

/// Whether a group's removal failed for processes still in it.
fn is_busy(removal: io::Result<()>) -> bool {
    removal.is_err_and(|e| e.kind() == io::ErrorKind::ResourceBusy)
}

/// Removes the groups under `parent` that an agent no longer running left behind: empty ones
/// (their containers ended while no agent watched) made more than a minute ago (one just made
/// may be a container's of another agent, about to be joined).
fn remove_abandoned(parent: &Path) {
    let subdirs = |dir: &Path| {
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        entries.map(|e| e.path()).filter(|p| p.is_dir()).collect::<Vec<_>>()
    };
    let old = |dir: &Path| {
        let made = std::fs::metadata(dir).and_then(|m| m.modified());
        made.is_ok_and(|made| made.elapsed().is_ok_and(|age| age > ABANDONED_AFTER))
    };
    for pod in subdirs(parent) {
        for container in subdirs(&pod) {
            let procs = std::fs::read_to_string(container.join("cgroup.procs"));
            if old(&container) && procs.is_ok_and(|p| p.trim().is_empty()) {
                let _ = std::fs::remove_dir(&container);
            }
        }
        let _ = std::fs::remove_dir(&pod);
    }
}

/// Makes `dir` and its pod's group; tried again when the pod's group was removed in between
/// (its last container's group removed it as it ended).
fn make(dir: &Path) -> io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::create_dir_all(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 3 => tries += 1,
            other => return other,
        }
    }
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(dir.join(file), value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.join(file).display())))
}

/// Whether this process can make groups in `parent` (a probe group made and removed).
fn writable(parent: &Path) -> bool {
    // Unique to this call: detections at once (one per runtime) must not share a probe.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = parent.join(format!("probe-{}-{n}", std::process::id()));
    let made = std::fs::create_dir(&probe).is_ok();
    made && std::fs::remove_dir(&probe).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_group_still_busy_is_emptied_again_and_removed() {
        let root = nix::unistd::geteuid().is_root();
        let mount = Path::new("/sys/fs/cgroup");
        let Some(cgroups) = Cgroups::detect(mount).filter(|_| root) else {
            eprintln!("skipped: not root, or no cgroup v1 memory controller");
            return;
        };
        let name = format!("pod-busy-test-{}/c", std::process::id());
        let resources = Resources { cpu_request_millis: Some(100), ..Resources::default() };
        let group = cgroups.create(&name, &resources).unwrap();
        // A process that joins after the group was emptied (as an exec probe's may).
        let mut late = tokio::process::Command::new("sleep");
        let mut late = late.arg("1000").kill_on_drop(true).spawn().unwrap();
        let pid = late.id().unwrap().to_string();
        for procs in group.procs_files() {
            std::fs::write(procs, &pid).unwrap();
        }
        assert!(is_busy(std::fs::remove_dir(&group.memory)), "busy while it is in");

        group.remove().await;
        for dir in std::iter::once(&group.memory).chain(&group.cpu) {
            assert!(!dir.exists(), "{} removed", dir.display());
            assert!(!dir.parent().unwrap().exists(), "its pod's group too");
        }
        assert!(!late.wait().await.unwrap().success(), "killed");
    }
}
