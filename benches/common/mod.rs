//! What every bench shares: the median of runs, and writing results where `make bench` and the
//! README expect them (target/bench-results/NAME.json), printed as well.

#![allow(dead_code)]

#[path = "../../tests/integration/util/metrics.rs"]
pub mod metrics;

/// The allocator the `kplane` binary uses, so that in-process benches measure the same thing.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

pub fn report(name: &str, results: &serde_json::Value) {
    let text = serde_json::to_string_pretty(results).unwrap();
    println!("{text}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}
