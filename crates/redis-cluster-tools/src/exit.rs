//! How the small tools end: shared by `bus-dump` and, from the examples package, by
//! `keyslot` and `route`.

use std::fmt;
use std::io;

/// A usage error's text: [`exit`] ends the tool with status 2 for it, as command-line tools
/// do, where any other failure is 1.
#[derive(Debug)]
struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The error of a command line that the tool cannot follow (an unknown option, a missing
/// value): its `text` is printed as any error is, and the exit status is 2.
#[allow(dead_code)] // keyslot takes no option that can be wrong
pub(crate) fn usage(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, Usage(text))
}

/// A command line lexopt could not read (an unknown option, a missing or extra value) as a
/// [`usage`] error.
#[allow(dead_code)] // keyslot reads its command line by hand
pub(crate) fn lexopt(e: lexopt::Error) -> io::Error {
    usage(e.to_string())
}

/// Ends the tool named `tool` as its `run` went: exit 0 on success and when its reader
/// stopped reading (`tool … | head`: a broken pipe is not an error), else `tool: error` on
/// standard error and exit 2 for a [`usage`] error, 1 for any other.
pub(crate) fn exit(tool: &str, result: io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("{tool}: {e}");
            let usage = e.get_ref().is_some_and(|inner| inner.is::<Usage>());
            std::process::exit(if usage { 2 } else { 1 });
        }
    }
}
