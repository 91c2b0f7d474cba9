//! The proxy's configuration files against any text (issue 27): its TOML (serde) and
//! nutcracker's YAML (yaml-rust2, and the event walk that finds an unknown key's line) never
//! panic, and a file is read the same whichever way its format was decided.
//!
//! Seeds: nutcracker 0.5.0's own example file, the TOML of the proxy's documentation, a
//! TOML pool with every client limit set in the server's words, and a YAML file with pools
//! of the proxy's kinds.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/redis-cluster-proxy/src/proxy/config.rs"]
mod config;

use std::path::Path;

use config::{Config, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let toml = Config::load_as(Format::Toml, text).map(|c| format!("{c:?}"));
    let yaml = Config::load_as(Format::Yaml, text).map(|c| format!("{c:?}"));
    // A file without an extension is read as the format its content parses as.
    let guessed = Config::load_as(Format::of(Path::new("proxy"), text), text)
        .map(|c| format!("{c:?}"))
        .map_err(|e| e.to_string());
    let expected = if Config::is_toml(text) { toml } else { yaml };
    assert_eq!(guessed, expected.map_err(|e| e.to_string()));
});
