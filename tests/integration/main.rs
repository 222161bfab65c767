//! kplane's integration tests: one binary; each test starts real `kplane` processes.

mod util;

mod admission;
mod agent;
mod apply;
mod bad_input;
mod cluster;
mod concurrency;
mod config_cli;
mod durability;
mod events;
mod images;
mod kubectl;
mod media;
mod python_client;
mod secure_port;
mod services;
mod watch;
