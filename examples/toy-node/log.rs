//! The toy node's log, in redis-server's format: `pid:role dd Mon yyyy hh:mm:ss.mmm L text`,
//! where role is `M` (master) or `S` (replica) and L the level (`.` debug, `-` verbose, `*`
//! notice, `#` warning). Lines go to stdout, or appended to `logfile` (opened for each line,
//! as the server does, so that the file can be rotated under it).
//!
//! Each line is a `tracing` event of the target [`TARGET`], at the server's level as
//! tracing's (debug `TRACE`, verbose `DEBUG`, notice `INFO`, warning `WARN`), with the fields
//! `role` and, when the node has one, `logfile`. [`ServerFormat`] is the layer that writes
//! it as the server would; the toy node and the toy cluster install it, and a program that
//! hosts the nodes can add layers of its own beside it (JSON, a collector). A node's
//! `loglevel` is applied before the event is made, as it can change at any time (CONFIG SET)
//! and differ between the nodes of one process.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

/// The target of the nodes' events.
pub(crate) const TARGET: &str = "toy_node";

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

    /// The server's level of tracing's (`ERROR` is a warning: the server has no higher).
    fn of_tracing(level: tracing::Level) -> Self {
        match level {
            tracing::Level::TRACE => Self::Debug,
            tracing::Level::DEBUG => Self::Verbose,
            tracing::Level::INFO => Self::Notice,
            _ => Self::Warning,
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
    /// Logs one line if `level` is at or above the configured one: a tracing event, which
    /// [`ServerFormat`] writes.
    pub(crate) fn write(&self, level: Level, text: &str) {
        if level < self.level {
            return;
        }
        let role = tracing::field::display(self.role);
        let logfile = self
            .file
            .as_deref()
            .map(|path| tracing::field::display(path.display()));
        // A level of an event is a constant of its call site: one call site each.
        macro_rules! emit {
            ($level:expr) => {
                tracing::event!(target: TARGET, $level, role, logfile, "{text}")
            };
        }
        // The server's level as tracing's; `Level::of_tracing` is the way back.
        match level {
            Level::Debug => emit!(tracing::Level::TRACE),
            Level::Verbose => emit!(tracing::Level::DEBUG),
            Level::Notice => emit!(tracing::Level::INFO),
            Level::Warning => emit!(tracing::Level::WARN),
        }
    }

    /// Writes text as it is (the start-up banner): not a line of the log, so not an event.
    pub(crate) fn raw(&self, text: &str) {
        write_out(self.file.as_deref(), text);
    }
}

/// Appends `text` to `file`, or writes it to stdout.
fn write_out(file: Option<&Path>, text: &str) {
    // A log that cannot be written is not a reason to stop serving.
    match file {
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

/// The layer that writes the nodes' events (target [`TARGET`]) as redis-server writes its
/// log lines, each to its node's `logfile` or to stdout. Other targets are not its.
pub(crate) struct ServerFormat;

impl ServerFormat {
    /// Installs a subscriber of this layer alone as the process's default; false if one was
    /// installed already.
    pub(crate) fn install() -> bool {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Self)).is_ok()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ServerFormat {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != TARGET {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let line = format!(
            "{}:{} {} {} {}\n",
            std::process::id(),
            fields.role,
            timestamp(ms),
            Level::of_tracing(*event.metadata().level()).mark(),
            fields.message
        );
        write_out(fields.logfile.as_deref(), &line);
    }
}

/// The fields of a node's event.
#[derive(Default)]
struct Fields {
    message: String,
    role: String,
    /// The path as displayed (a path that is not UTF-8 is written to its lossy name).
    logfile: Option<PathBuf>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `message` is the format's arguments, `role` and `logfile` display values: their
        // Debug is their text, unquoted.
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message = text,
            "role" => self.role = text,
            "logfile" => self.logfile = Some(PathBuf::from(text)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::{Fields, Level, Log, ServerFormat, TARGET};

    /// An event as another layer sees it: its target, level, `role` and message.
    type Event = (String, tracing::Level, String, String);

    /// A layer of a hosting program's own: what it is given of each event.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<Event>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let mut fields = Fields::default();
            event.record(&mut fields);
            if let Ok(mut seen) = self.0.lock() {
                seen.push((
                    event.metadata().target().to_string(),
                    *event.metadata().level(),
                    fields.role,
                    fields.message,
                ));
            }
        }
    }

    #[test]
    fn each_line_is_an_event_written_in_the_servers_format_to_the_nodes_logfile() {
        let dir = std::env::temp_dir().join(format!("toy-node-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let path = dir.join("node.log");
        let _ = std::fs::remove_file(&path);
        let log = Log {
            level: Level::Verbose,
            file: Some(path.clone()),
            role: 'S',
        };
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry()
            .with(ServerFormat)
            .with(seen.clone());
        tracing::subscriber::with_default(subscriber, || {
            log.write(Level::Notice, "MASTER <-> REPLICA sync started");
            log.write(Level::Debug, "below verbose: not an event");
            log.write(Level::Warning, "Cluster state changed: ok");
            log.write(Level::Verbose, "Closing idle client");
        });
        let seen = seen.0.lock().expect("the events").clone();
        let expected = [
            (tracing::Level::INFO, "MASTER <-> REPLICA sync started"),
            (tracing::Level::WARN, "Cluster state changed: ok"),
            (tracing::Level::DEBUG, "Closing idle client"),
        ];
        assert_eq!(seen.len(), expected.len(), "{seen:?}");
        for ((target, level, role, message), (want_level, want)) in seen.iter().zip(expected) {
            assert_eq!(
                (target.as_str(), *level, role.as_str(), message.as_str()),
                (TARGET, want_level, "S", want)
            );
        }
        // `pid:S dd Mon yyyy hh:mm:ss.mmm L text`, L the server's mark of the level.
        let written = std::fs::read_to_string(&path).expect("the log file");
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 3, "{written}");
        let prefix = format!("{}:S ", std::process::id());
        for (line, (mark, text)) in lines.iter().zip([
            ('*', "MASTER <-> REPLICA sync started"),
            ('#', "Cluster state changed: ok"),
            ('-', "Closing idle client"),
        ]) {
            let rest = line
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{line}"));
            // The 24 characters of the time stamp, a space, the mark, a space, the text.
            let (stamp, tail) = rest.split_at(24);
            assert_eq!(stamp.len(), 24, "{line}");
            assert_eq!(tail, format!(" {mark} {text}"), "{line}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
