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

/// The CPU time and resident memory of every process group, summed over its processes: one
/// pass over /proc, however many containers are asked about.
pub fn group_usages() -> std::collections::HashMap<u32, Usage> {
    let mut groups = std::collections::HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return groups };
    let pids = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    for (group, usage) in pids.filter_map(process_stat) {
        let total: &mut Usage = groups.entry(group).or_default();
        *total = *total + usage;
    }
    groups
}

/// The CPU time and resident memory of one process.
pub fn process_usage(pid: u32) -> Usage {
    process_stat(pid).map(|(_, usage)| usage).unwrap_or_default()
}

/// Clock ticks as nanoseconds (wide enough for a many-core machine's ticks since boot).
fn ticks_to_nanoseconds(ticks: u64) -> u64 {
    let nanoseconds = u128::from(ticks) * 1_000_000_000 / u128::from(clock_ticks_per_second());
    u64::try_from(nanoseconds).unwrap_or(u64::MAX)
}

/// The machine's CPU time (all cores, but idle and I/O wait) and memory in use (total less
/// available), as a kubelet reports its node from the root cgroup.
pub fn machine_usage() -> Usage {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    Usage {
        cpu_nanoseconds: ticks_to_nanoseconds(busy_ticks(&stat)),
        rss_bytes: memory_in_use(&meminfo),
    }
}

/// The busy ticks of `/proc/stat`'s first line: user, nice, system, irq, softirq and steal
/// (not idle, not iowait; guest time is counted in user already).
fn busy_ticks(stat: &str) -> u64 {
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else { return 0 };
    let ticks: Vec<u64> = line.split_whitespace().skip(1).filter_map(|t| t.parse().ok()).collect();
    [0, 1, 2, 5, 6, 7].iter().filter_map(|i| ticks.get(*i)).sum()
}

/// `MemTotal - MemAvailable` of `/proc/meminfo`, in bytes.
fn memory_in_use(meminfo: &str) -> u64 {
    let kib = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    kib("MemTotal:").saturating_sub(kib("MemAvailable:")) * 1024
}

/// (process group, usage) of a process.
fn process_stat(pid: u32) -> Option<(u32, Usage)> {
    let stat = kplane_actors::agent::runtime::proc_stat(pid)?;
    let usage = Usage {
        cpu_nanoseconds: ticks_to_nanoseconds(stat.cpu_ticks),
        rss_bytes: stat.rss_pages * page_size(),
    };
    Some((stat.process_group, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_is_read_from_proc() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(busy_ticks(stat), 100 + 5 + 50 + 3 + 2 + 1);
        let meminfo = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n";
        assert_eq!(memory_in_use(meminfo), 600 * 1024);
        let machine = machine_usage();
        assert!(machine.cpu_nanoseconds > 0 && machine.rss_bytes > 0, "{machine:?}");
    }

    #[test]
    fn our_own_process_group_uses_memory() {
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        let usage = group_usages().get(&pgid).copied().unwrap_or_default();
        assert!(usage.rss_bytes > 0, "{usage:?}");
        let own = process_usage(std::process::id());
        assert!(own.rss_bytes > 0 && own.rss_bytes <= usage.rss_bytes, "{own:?} {usage:?}");
    }
}
