//! The toy node's append-only file, in the single-file layout of Redis before 7.0
//! (`dir/appendfilename`), which 7.0 still reads (it turns it into its multi-part layout):
//! RESP commands, one per change, as the replicas get them (`RESTORE key expiry payload
//! REPLACE ABSTTL`, `DEL key`, `FLUSHALL`). `appendonly yes` writes the whole keyspace to it
//! (a rewrite), then appends every write; the start replays it instead of reading the RDB
//! file. `appendfsync always` syncs each write; `everysec` and `no` leave it to the OS (the
//! toy runs no background fsync).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use redis_cluster_proto::resp::{Decoder, Frame};

use crate::config::write_durably;
use crate::db::Db;

/// An open append-only file.
pub(crate) struct Aof {
    file: File,
    path: PathBuf,
    /// `appendfsync always`.
    pub(crate) fsync_always: bool,
}

impl Aof {
    /// A new file holding `content` (the keyspace), written as nodes.conf is, then opened
    /// for appending.
    pub(crate) fn rewrite(
        path: &Path,
        content: &[u8],
        fsync_always: bool,
    ) -> std::io::Result<Self> {
        write_durably(path, content)?;
        Self::open(path, fsync_always)
    }

    /// The file as it is, opened for appending.
    pub(crate) fn open(path: &Path, fsync_always: bool) -> std::io::Result<Self> {
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            fsync_always,
        })
    }

    /// Appends one write's records.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)?;
        if self.fsync_always {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Syncs what was appended (at shutdown).
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// What replaying a file did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// Commands applied.
    pub(crate) commands: usize,
    /// Bytes of an incomplete last command cut off (a crash in the middle of a write), as
    /// the server does with `aof-load-truncated yes`.
    pub(crate) truncated: usize,
}

/// Replays the file at `path` into `db`; `None` when there is no file. A command the stream
/// does not carry, or bytes that are not RESP, stop the start (the server's "Bad file format
/// reading the append only file"); an incomplete last command is cut off the file.
pub(crate) fn load(path: &Path, db: &mut Db, now: u64) -> Result<Option<Loaded>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let total = bytes.len();
    let mut buf = BytesMut::from(&bytes[..]);
    let mut decoder = Decoder::new();
    let mut commands = 0;
    let bad = || {
        format!(
            "Bad file format reading the append only file {}: make a backup of your AOF file, \
             then use ./redis-check-aof --fix <filename.manifest>",
            path.display()
        )
    };
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(Frame::Array(items))) => {
                let args: Option<Vec<Bytes>> = items
                    .into_iter()
                    .map(|item| match item {
                        Frame::BulkString(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                let args = args.ok_or_else(bad)?;
                // SELECT 0 is what a server writes first; the toy has database 0 only.
                let select = args.len() == 2
                    && args[0].eq_ignore_ascii_case(b"SELECT")
                    && args[1][..] == b"0"[..];
                if !select && !crate::replication::apply(db, &args, now) {
                    return Err(bad());
                }
                commands += 1;
            }
            Ok(Some(_)) | Err(_) => return Err(bad()),
            Ok(None) => break,
        }
    }
    let truncated = buf.len();
    if truncated > 0 {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        file.set_len((total - truncated) as u64)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(Some(Loaded {
        commands,
        truncated,
    }))
}
