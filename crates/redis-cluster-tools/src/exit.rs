//! How the small tools end: shared by `bus-dump` and, from the examples package, by
//! `keyslot` and `route`.

use std::io;

/// Ends the tool named `tool` as its `run` went: exit 0 on success and when its reader
/// stopped reading (`tool … | head`: a broken pipe is not an error), else `tool: error` on
/// standard error and exit 1.
pub(crate) fn exit(tool: &str, result: io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("{tool}: {e}");
            std::process::exit(1);
        }
    }
}
