//! A segmentation fault is logged the way nutcracker logs it,
//! `[.......................] signal 11 (SIGSEGV) received, core dumping`, before the process
//! dies of it (and dumps core where the system allows).
//!
//! This is the one place with `unsafe` in the proxy: no safe interface installs a SIGSEGV
//! handler (tokio's signals and signal-hook refuse it, as they must: such a handler may only
//! call async-signal-safe functions), so it is `sigaction`, `write` and `raise` from libc.

#![allow(unsafe_code)]

use crate::proxy::log;

/// nutcracker's line: its signal-safe logger writes dots where the time would be.
const LINE: &[u8] = b"[.......................] signal 11 (SIGSEGV) received, core dumping\n";

/// Installs the handler. Rust's own (which reports stack overflows) is replaced: an overflow
/// is then logged as this line, and the process still dies of SIGSEGV.
pub(crate) fn log_segfaults() {
    // SAFETY: `sigaction` is given a zeroed, then filled, `sigaction` struct that lives for
    // the call, a handler of the signature SA_SIGINFO-less handlers have, and no old action
    // to write. SA_RESETHAND restores the default action before the handler runs, so the
    // `raise` in it ends the process; SA_NODEFER lets that second signal through.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_segfault as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut());
    }
}

extern "C" fn on_segfault(signal: libc::c_int) {
    // SAFETY: `write` and `raise` are async-signal-safe. The descriptor is the log's (or
    // standard error), read from an atomic; the buffer is a static of the length given. A
    // failed write changes nothing: the process dies either way.
    unsafe {
        let _ = libc::write(log::raw_fd(), LINE.as_ptr().cast(), LINE.len());
        libc::raise(signal);
    }
}
