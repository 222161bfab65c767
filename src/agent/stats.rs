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
    let ticks = clock_ticks_per_second();
    let page = page_size();
    let mut total = Usage::default();
    let Ok(entries) = std::fs::read_dir("/proc") else { return total };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(close) = stat.rfind(')') else { continue };
        // Fields after the command name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15)
        // ... rss(24), numbered as in proc(5).
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        if field(5) != u64::from(pgid) {
            continue;
        }
        total.cpu_nanoseconds += (field(14) + field(15)) * 1_000_000_000 / ticks;
        total.rss_bytes += field(24) * page;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_group_uses_memory() {
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        let usage = group_usage(pgid);
        assert!(usage.rss_bytes > 0, "{usage:?}");
    }
}
