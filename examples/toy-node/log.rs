//! The toy node's log, in redis-server's format: `pid:role dd Mon yyyy hh:mm:ss.mmm L text`,
//! where role is `M` (master) or `S` (replica) and L the level (`.` debug, `-` verbose, `*`
//! notice, `#` warning). Lines go to stdout, or appended to `logfile` (opened for each line,
//! as the server does, so that the file can be rotated under it).

use std::io::Write;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// How much a line matters; lines below the configured level are not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Debug,
    Verbose,
    Notice,
    Warning,
}

impl Level {
    /// `loglevel`'s words.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "debug" => Some(Self::Debug),
            "verbose" => Some(Self::Verbose),
            "notice" => Some(Self::Notice),
            "warning" => Some(Self::Warning),
            _ => None,
        }
    }

    fn mark(self) -> char {
        match self {
            Self::Debug => '.',
            Self::Verbose => '-',
            Self::Notice => '*',
            Self::Warning => '#',
        }
    }
}

/// Where a node's lines go, and which.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    pub(crate) level: Level,
    /// `None`: stdout.
    pub(crate) file: Option<PathBuf>,
    /// `M` or `S`.
    pub(crate) role: char,
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `dd Mon yyyy hh:mm:ss.mmm` (UTC) of a time in ms since the epoch.
pub(crate) fn timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's public algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

impl Log {
    /// Writes one line if `level` is at or above the configured one.
    pub(crate) fn write(&self, level: Level, text: &str) {
        if level < self.level {
            return;
        }
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let line = format!(
            "{}:{} {} {} {text}\n",
            std::process::id(),
            self.role,
            timestamp(ms),
            level.mark()
        );
        self.raw(&line);
    }

    /// Writes text as it is (the start-up banner).
    pub(crate) fn raw(&self, text: &str) {
        // A log that cannot be written is not a reason to stop serving.
        match &self.file {
            None => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            Some(path) => {
                if let Ok(mut file) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = file.write_all(text.as_bytes());
                }
            }
        }
    }
}
