//! What a panic ends. A panic in a request's handler is that request's (`api::panic_recovery`
//! answers it 500 and the server goes on, as kube-apiserver's panic filter does), and one in a
//! blocking task is the error of whoever awaits it. A panic anywhere else (a store shard or
//! writer, the watch hub, a controller, the scheduler, a node agent) would leave that component
//! dead behind a server that still answers; the process aborts instead, for its supervisor to
//! start it again, as k3s and kube-controller-manager end on a controller's panic.

use std::cell::Cell;

thread_local! {
    /// Whether this thread is one of an HTTP server's workers.
    static SERVES_REQUESTS: Cell<bool> = const { Cell::new(false) };
}

/// The names tokio gives its pools' threads (recent releases, earlier ones), whose panics it hands
/// to the awaiting task.
const TOKIO_POOL_THREADS: [&str; 2] = ["tokio-rt-worker", "tokio-runtime-worker"];

/// Marks the calling thread as an HTTP server's worker: a panic on it is a request's.
pub fn mark_request_thread() {
    SERVES_REQUESTS.with(|serves| serves.set(true));
}

/// Installs the hook: after the standard report of a panic (its message and place), a panic
/// that is neither a request's nor a blocking task's aborts the process.
pub fn abort_on_component_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        if is_contained() {
            return;
        }
        // Not `exit`: the C++ destructors it runs (RocksDB's) would race the threads still
        // running. An abort is what `panic = "abort"` does, and no acknowledged write is lost
        // (each was synced to the log first).
        eprintln!(
            "kplane: a panic on thread {} ended the process: a component it ran is gone",
            thread_name()
        );
        std::process::abort();
    }));
}

/// Whether the panicking thread's panic is caught and answered by someone.
fn is_contained() -> bool {
    SERVES_REQUESTS.with(Cell::get)
        || std::thread::current().name().is_some_and(|name| TOKIO_POOL_THREADS.contains(&name))
}

/// The thread's name as `top -H` shows it (kplane names its components' threads there, see
/// `kplane_actors::threads`), else as Rust knows it.
fn thread_name() -> String {
    let kernel = std::fs::read_to_string("/proc/thread-self/comm").ok();
    let name = kernel.as_deref().map(str::trim_end).filter(|name| !name.is_empty());
    match name {
        Some(name) => name.to_string(),
        None => std::thread::current().name().unwrap_or("unnamed").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Output};

    /// Set in the child process (this test binary, run again for one test): the kind of
    /// thread it panics on, after installing the hook.
    const ROLE: &str = "KPLANE_PANIC_TEST";

    /// In the child: installs the hook, panics on a thread of `role`'s kind, says if it went on.
    fn act_as_child(role: &str) {
        super::abort_on_component_panic();
        if role == "blocking" {
            // On tokio's own blocking pool, as `web::block` and `spawn_blocking` run work.
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let task = runtime.spawn_blocking(|| panic!("a blocking thread's bug"));
            assert!(runtime.block_on(task).is_err());
        } else {
            let role = role.to_string();
            let panicked = std::thread::spawn(move || {
                kplane_actors::threads::name_current("kplane-doomed");
                if role == "request" {
                    super::mark_request_thread();
                }
                panic!("a {role} thread's bug");
            })
            .join();
            assert!(panicked.is_err());
        }
        eprintln!("the process went on");
    }

    /// Runs `test` of this binary again in a child process that panics as `role` says.
    fn run_child(test: &str, role: &str) -> Output {
        let exe = std::env::current_exe().unwrap();
        Command::new(exe).args([test, "--exact", "--nocapture"]).env(ROLE, role).output().unwrap()
    }

    #[test]
    fn a_component_threads_panic_aborts_the_process() {
        if let Ok(role) = std::env::var(ROLE) {
            return act_as_child(&role);
        }
        let out =
            run_child("panics::tests::a_component_threads_panic_aborts_the_process", "component");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(6), "SIGABRT: {stderr}");
        }
        assert!(stderr.contains("a component thread's bug"), "the panic is reported: {stderr}");
        assert!(
            stderr.contains("a panic on thread kplane-doomed ended the process"),
            "named by its kernel name: {stderr}"
        );
        assert!(!stderr.contains("the process went on"), "{stderr}");
    }

    #[test]
    fn a_request_or_blocking_threads_panic_leaves_the_process_running() {
        if let Ok(role) = std::env::var(ROLE) {
            return act_as_child(&role);
        }
        let test = "panics::tests::a_request_or_blocking_threads_panic_leaves_the_process_running";
        for role in ["request", "blocking"] {
            let out = run_child(test, role);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{role}: {stderr}");
            let bug = format!("a {role} thread's bug");
            assert!(stderr.contains(&bug), "the panic is reported: {stderr}");
            assert!(stderr.contains("the process went on"), "{role}: {stderr}");
            assert!(!stderr.contains("ended the process"), "{role}: {stderr}");
        }
    }
}
