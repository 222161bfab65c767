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

/// (process group, usage) of a process, from /proc/PID/stat.
fn process_stat(pid: u32) -> Option<(u32, Usage)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    // Fields after the command name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15) ...
    // rss(24), numbered as in proc(5).
    let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let usage = Usage {
        cpu_nanoseconds: (field(14) + field(15)) * 1_000_000_000 / clock_ticks_per_second(),
        rss_bytes: field(24) * page_size(),
    };
    Some((u32::try_from(field(5)).ok()?, usage))
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
