//! A blocking connection to one node: commands out with `redis-resp`'s encoder, replies in
//! with its decoder, pipelined when there are many.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use redis_resp::{Frame, Status};

/// A reply with its strings copied out of the read buffer.
pub(crate) type Reply = Frame<Vec<u8>>;

/// How many commands go out before their replies are read.
const PIPELINE: usize = 512;

pub(crate) struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Where the unread part of `buf` starts.
    start: usize,
    /// `host:port`.
    pub(crate) addr: String,
}

impl Conn {
    pub(crate) fn connect(addr: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        // MIGRATE of a big key may take a while; a dead node must not hang the doctor.
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.set_write_timeout(Some(Duration::from_secs(60)))?;
        Ok(Self {
            stream,
            buf: Vec::new(),
            start: 0,
            addr: addr.to_owned(),
        })
    }

    /// One command and its reply; an error reply is an `Ok` value, for the caller to read.
    pub(crate) fn call<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> io::Result<Reply> {
        let mut out = Vec::new();
        redis_resp::encode_command(argv, &mut out);
        self.stream.write_all(&out)?;
        self.read()
    }

    /// One command that must not answer an error.
    pub(crate) fn ok<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> io::Result<Reply> {
        let reply = self.call(argv)?;
        if let Frame::SimpleError(e) | Frame::BulkError(e) = &reply {
            let name: Vec<String> = argv
                .iter()
                .take(3)
                .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                .collect();
            return Err(io::Error::other(format!(
                "{} on {}: {}",
                name.join(" "),
                self.addr,
                String::from_utf8_lossy(e)
            )));
        }
        Ok(reply)
    }

    /// Many commands, their replies in order, `PIPELINE` in flight at a time.
    pub(crate) fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> io::Result<Vec<Reply>> {
        let mut replies = Vec::with_capacity(commands.len());
        for batch in commands.chunks(PIPELINE) {
            let mut out = Vec::new();
            for argv in batch {
                redis_resp::encode_command(argv, &mut out);
            }
            self.stream.write_all(&out)?;
            for _ in batch {
                replies.push(self.read()?);
            }
        }
        Ok(replies)
    }

    fn read(&mut self) -> io::Result<Reply> {
        loop {
            if self.start < self.buf.len() {
                let input = &self.buf[self.start..];
                match redis_resp::decode(input) {
                    Ok(Status::Complete((frame, used))) => {
                        let frame = frame.map_bytes(&mut |b: &[u8]| b.to_vec());
                        self.start += used;
                        return Ok(frame);
                    }
                    Ok(Status::Incomplete { .. }) => {}
                    Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                }
            }
            // Keep the buffer from growing with every reply already read.
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} closed the connection", self.addr),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A string reply's text (bulk, simple or verbatim), or `""`.
pub(crate) fn text(reply: &Reply) -> String {
    match reply {
        Frame::BulkString(b) | Frame::SimpleString(b) => String::from_utf8_lossy(b).into_owned(),
        Frame::VerbatimString { text, .. } => String::from_utf8_lossy(text).into_owned(),
        _ => String::new(),
    }
}

/// A string reply's bytes as they are (keys need not be UTF-8), or none.
pub(crate) fn bytes(reply: &Reply) -> Vec<u8> {
    match reply {
        Frame::BulkString(b) | Frame::SimpleString(b) => b.clone(),
        _ => Vec::new(),
    }
}

/// An integer reply, or `None`.
pub(crate) fn int(reply: &Reply) -> Option<i64> {
    match reply {
        Frame::Integer(n) => Some(*n),
        _ => None,
    }
}

/// The elements of an array reply (none for anything else).
pub(crate) fn items(reply: &Reply) -> &[Reply] {
    match reply {
        Frame::Array(items) | Frame::Set(items) => items,
        _ => &[],
    }
}

/// A command as owned arguments.
pub(crate) fn cmd<A: AsRef<[u8]>>(argv: &[A]) -> Vec<Vec<u8>> {
    argv.iter().map(|a| a.as_ref().to_vec()).collect()
}
