//! The names of the threads kplane's long-lived actors have to themselves (`kplane-shard-0`,
//! `kplane-writer-0`, `kplane-hub`, ...), so that `top -H`, `ps -L` and `perf` tell them apart.

/// Names the calling thread. Linux keeps the first 15 bytes; elsewhere, and where `/proc` is
/// not mounted, the thread keeps its name.
pub fn name_current(name: &str) {
    #[cfg(target_os = "linux")]
    {
        let _ = std::fs::write("/proc/thread-self/comm", name);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn the_calling_thread_is_named() {
        std::thread::spawn(|| {
            super::name_current("kplane-test-thread-long");
            let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
            assert_eq!(comm.trim_end(), "kplane-test-thr", "Linux keeps 15 bytes");
        })
        .join()
        .unwrap();
    }
}
