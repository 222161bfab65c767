//! Resource usage of containers, read from /proc: CPU time and resident memory summed over a
//! container's process group.

/// Usage of one process group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_nanoseconds: u64,
    pub rss_bytes: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            cpu_nanoseconds: self.cpu_nanoseconds + other.cpu_nanoseconds,
            rss_bytes: self.rss_bytes + other.rss_bytes,
        }
    }
}

fn clock_ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(4096)
}

/// The CPU time and resident memory of every process in process group `pgid`.
pub fn group_usage(pgid: u32) -> Usage {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Usage::default() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|pid| process_stat(pid).filter(|(pgrp, _)| *pgrp == pgid).map(|(_, u)| u))
        .fold(Usage::default(), |total, usage| total + usage)
}

/// The CPU time and resident memory of one process.
pub fn process_usage(pid: u32) -> Usage {
    process_stat(pid).map(|(_, usage)| usage).unwrap_or_default()
}

/// (process group, usage) of a process.
fn process_stat(pid: u32) -> Option<(u32, Usage)> {
    let stat = kplane_actors::agent::runtime::proc_stat(pid)?;
    let usage = Usage {
        cpu_nanoseconds: stat.cpu_ticks * 1_000_000_000 / clock_ticks_per_second(),
        rss_bytes: stat.rss_pages * page_size(),
    };
    Some((stat.process_group, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_group_uses_memory() {
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        let usage = group_usage(pgid);
        assert!(usage.rss_bytes > 0, "{usage:?}");
        let own = process_usage(std::process::id());
        assert!(own.rss_bytes > 0 && own.rss_bytes <= usage.rss_bytes, "{own:?} {usage:?}");
    }
}
