//! kplane's integration tests: one binary; each test starts real `kplane` processes.

mod util;

mod bad_input;
mod concurrency;
mod config_cli;
mod durability;
mod kubectl;
mod watch;
