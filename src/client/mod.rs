//! Remote implementations of the engine's `ApiClient` trait: how a component on another machine
//! (`kplane agent --server URL`) reaches cluster state over the REST and watch API.
//!
//! The in-process implementation lives beside the trait in `kplane_actors::client`; this one
//! speaks HTTP, so it lives in the binary crate, next to the server it talks to.

pub mod rest;
