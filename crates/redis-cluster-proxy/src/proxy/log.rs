//! The proxy's log, as nutcracker keeps its own: lines `[YYYY-MM-DD HH:MM:SS.mmm] text` to
//! standard error or to the file of `-o`, a level from 0 (emergencies only) to 11 (default
//! 5, notices) that SIGTTIN raises and SIGTTOU lowers by one, and SIGHUP reopening the file
//! (after a log rotation moved it away).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// nutcracker's levels that the proxy uses.
pub(crate) const WARN: u8 = 4;
pub(crate) const NOTICE: u8 = 5;
pub(crate) const INFO: u8 = 6;
/// The highest level (nutcracker's `LOG_PVERB`).
pub(crate) const MAX: u8 = 11;

static LEVEL: AtomicU8 = AtomicU8::new(NOTICE);
static SINK: Mutex<Option<(String, File)>> = Mutex::new(None);
/// The descriptor the log is written to, for a signal handler that may not lock (standard
/// error until `-o` opens a file).
static FD: AtomicI32 = AtomicI32::new(2);

/// The log's file descriptor: all a signal handler can write to (see the binary's
/// `crash.rs`). It stays open until the next one is stored.
#[allow(dead_code)] // the binary's crash handler reads it; the tests that embed the proxy do not
pub(crate) fn raw_fd() -> i32 {
    FD.load(Ordering::Relaxed)
}

fn sink() -> std::sync::MutexGuard<'static, Option<(String, File)>> {
    SINK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Logs to `path` from now on (appending), at `level`.
pub(crate) fn init(path: Option<&str>, level: u8) -> std::io::Result<()> {
    LEVEL.store(level.min(MAX), Ordering::Relaxed);
    if let Some(path) = path {
        let file = open(path)?;
        FD.store(file.as_raw_fd(), Ordering::Relaxed);
        *sink() = Some((path.to_string(), file));
    }
    Ok(())
}

fn open(path: &str) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The current level.
pub(crate) fn level() -> u8 {
    LEVEL.load(Ordering::Relaxed)
}

/// Whether a message of `level` is written.
pub(crate) fn enabled(level: u8) -> bool {
    level <= self::level()
}

/// Writes `text` if `level` is enabled.
pub(crate) fn write(level: u8, text: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = format!("[{}] {text}\n", stamp());
    match sink().as_mut() {
        Some((_, file)) => {
            let _ = file.write_all(line.as_bytes());
        }
        None => eprint!("{line}"),
    }
}

/// SIGTTIN: one level more (up to 11).
pub(crate) fn level_up() {
    let level = (level() + 1).min(MAX);
    LEVEL.store(level, Ordering::Relaxed);
    write(0, format_args!("up log level to {level}"));
}

/// SIGTTOU: one level less (down to 0).
pub(crate) fn level_down() {
    let level = level().saturating_sub(1);
    LEVEL.store(level, Ordering::Relaxed);
    write(0, format_args!("down log level to {level}"));
}

/// SIGHUP: the log file opened again by its name (a rotated file is left to its new name).
pub(crate) fn reopen() {
    let mut sink = sink();
    if let Some((path, file)) = sink.as_mut() {
        match open(path) {
            Ok(reopened) => {
                // The new descriptor first: the old one stays open until it is replaced.
                FD.store(reopened.as_raw_fd(), Ordering::Relaxed);
                *file = reopened;
            }
            Err(e) => {
                let line = format!("[{}] reopening log file '{path}' failed: {e}\n", stamp());
                let _ = file.write_all(line.as_bytes());
            }
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` in UTC.
fn stamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        now.subsec_millis()
    )
}

/// The calendar date of a day number since 1970-01-01 (Howard Hinnant's days-to-civil
/// algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(11_016), (2000, 2, 29));
        assert_eq!(super::civil(20_787), (2026, 11, 30));
    }
}
