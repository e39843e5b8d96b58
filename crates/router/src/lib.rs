//! llrouter as a library: the configuration schema ([`config`]), and the live router that
//! `llrouter run` starts.

pub mod config;

pub use config::{ConfigError, RouterConfig, Steering};
