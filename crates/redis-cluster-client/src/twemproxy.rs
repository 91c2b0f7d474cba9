//! nutcracker (twemproxy) pools, without I/O: which server a command goes to, how a
//! multi-key command is cut into fragments and their replies put together again, and which
//! servers are out of service (`auto_eject_hosts`, `server_failure_limit`,
//! `server_retry_timeout`). The hashes and distributions are `redis-cluster-route`'s
//! [`twemproxy`](redis_cluster_route::twemproxy) module, checked key by key against nutcracker
//! 0.5.0.
//!
//! A driver keeps one [`Pool`] per nutcracker pool, asks it for a [`Plan`] per command, sends
//! what the plan says on its server connections, and reports failures in a row with
//! [`Pool::eject_if_failing`]. Time comes in as arguments; nothing here reads a clock. Only
//! with the `twemproxy` feature (it builds md-5, which a cluster-only user does not need).
//!
//! ```
//! use std::time::{Duration, Instant};
//! use bytes::Bytes;
//! use redis_cluster_client::twemproxy::{Ejection, Plan, Pool, PoolConfig, ServerConfig};
//! use redis_cluster_route::CommandTable;
//! use redis_cluster_route::twemproxy::{Distribution, Hash};
//! use redis_resp::Frame;
//!
//! let server = |name: &str| ServerConfig { name: name.into(), weight: 1 };
//! let mut pool = Pool::new(PoolConfig {
//!     hash: Hash::Fnv1aAnd64,
//!     hash_tag: Some(*b"{}"),
//!     distribution: Distribution::Ketama,
//!     servers: vec![server("127.0.0.1:6379"), server("127.0.0.1:6380")],
//!     ejection: Some(Ejection { failure_limit: 2, retry: Duration::from_secs(30) }),
//! });
//! let argv: Vec<Bytes> = ["MGET", "a", "b", "c"].map(Bytes::from).to_vec();
//! let Plan::Fragments(fragments) = pool.plan(&CommandTable::REDIS_7_0, &argv, 0) else {
//!     unreachable!("keys on two servers");
//! };
//! // The driver sends each part to its server, then merges what came back in part order.
//! let replies: Vec<Result<Frame, String>> = fragments
//!     .parts()
//!     .iter()
//!     .map(|(_, part)| Ok(Frame::Array(part[1..].iter().map(|_| Frame::NullBulkString).collect())))
//!     .collect();
//! let merged = fragments.merge(replies);
//! assert_eq!(merged.reply, Frame::Array(vec![Frame::NullBulkString; 3]));
//! assert!(!merged.hang_up);
//!
//! // Two failures in a row take a server out of service until its retry time.
//! let now = Instant::now();
//! let back = pool.eject_if_failing(0, 2, now);
//! assert_eq!(back, Some(now + Duration::from_secs(30)));
//! assert_eq!(pool.plan(&CommandTable::REDIS_7_0, &argv[..2], 0), Plan::One { server: 1, blocking: false });
//! pool.handle_timeout(now + Duration::from_secs(30));
//! assert_eq!(pool.in_service(), 2);
//! ```

use std::time::{Duration, Instant};

use bytes::Bytes;
use redis_cluster_route::twemproxy::{Continuum, Distribution, Hash, Weighted};
use redis_cluster_route::{CommandFlags, CommandTable, Split};
use redis_resp::Frame;

use crate::error_frame;

/// One `servers:` entry as the distribution sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The name its ketama points are made of (its configured name, else `host:port`).
    pub name: String,
    /// Its weight (at least 1).
    pub weight: u32,
}

/// `auto_eject_hosts: true`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ejection {
    /// `server_failure_limit`: failures in a row that take a server out (at least 1).
    pub failure_limit: u32,
    /// `server_retry_timeout`: how long it stays out.
    pub retry: Duration,
}

/// What a nutcracker pool is told once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// `hash:`.
    pub hash: Hash,
    /// `hash_tag:` (two characters, such as `{}`).
    pub hash_tag: Option<[u8; 2]>,
    /// `distribution:`.
    pub distribution: Distribution,
    /// `servers:`, in configuration order (the indexes [`Plan`] names).
    pub servers: Vec<ServerConfig>,
    /// Whether and how failing servers are taken out.
    pub ejection: Option<Ejection>,
}

/// Where one command goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// To this server (by configuration index), as the client sent it; `blocking` commands
    /// go on a connection of their own.
    One {
        /// The server.
        server: usize,
        /// A blocking command (BLPOP and the like).
        blocking: bool,
    },
    /// MGET, DEL, UNLINK, TOUCH, EXISTS or MSET over keys of several servers: one fragment
    /// per server.
    Fragments(Fragments),
    /// No server is in service. nutcracker drops the connection of an MGET's client
    /// without a reply (`hang_up`); anything else gets `reply`.
    NoServer {
        /// The error for the client.
        reply: Frame,
        /// Close the client's connection instead.
        hang_up: bool,
    },
}

/// A multi-key command's fragments, one per server.
#[derive(Clone, Debug, PartialEq)]
pub struct Fragments {
    split: Split,
    parts: Vec<(usize, Vec<Bytes>)>,
    mget: bool,
}

/// A fragmented command's reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// What the client gets.
    pub reply: Frame,
    /// Whether a server failed a fragment (then `reply` is that failure's `-ERR <reason>`).
    pub failed: bool,
    /// Close the client's connection after the reply: a split MGET a server failed, as
    /// nutcracker does.
    pub hang_up: bool,
}

impl Fragments {
    /// Each fragment: its server and its arguments, the command named in lower case as
    /// nutcracker names its fragments.
    pub fn parts(&self) -> &[(usize, Vec<Bytes>)] {
        &self.parts
    }

    /// The client's reply from each fragment's, in [`Fragments::parts`] order: `Ok` with what
    /// the server answered, `Err` with why there was no answer (nutcracker's `errno` text,
    /// such as `Connection refused`). A failed fragment fails the command with
    /// `-ERR <reason>`. A fragment answered with an error reply makes a DEL, UNLINK, TOUCH,
    /// EXISTS or MSET `-ERR Invalid argument`, as nutcracker 0.5.0 answers (its coalescing
    /// meets a reply of the wrong type: EINVAL); an MGET keeps the merged reply.
    pub fn merge(&self, replies: Vec<Result<Frame, String>>) -> Merged {
        let mut frames = Vec::with_capacity(replies.len());
        for reply in replies {
            match reply {
                Ok(frame) => frames.push(frame),
                Err(reason) => {
                    return Merged {
                        reply: error_frame(&format!("ERR {reason}")),
                        failed: true,
                        hang_up: self.mget,
                    };
                }
            }
        }
        let reply = if !self.mget && frames.iter().any(Frame::is_error) {
            error_frame("ERR Invalid argument")
        } else {
            self.split
                .merge(frames)
                .unwrap_or_else(|e| error_frame(&format!("ERR cannot merge the replies: {e}")))
        };
        Merged {
            reply,
            failed: false,
            hang_up: false,
        }
    }
}

/// The commands nutcracker splits by server, as it names their fragments.
const SPLIT: [&str; 6] = ["mget", "del", "unlink", "touch", "exists", "mset"];

/// A nutcracker pool's servers, the continuum of those in service, and their ejections.
#[derive(Clone, Debug)]
pub struct Pool {
    config: PoolConfig,
    /// Per server: until when it is out of service.
    out_until: Vec<Option<Instant>>,
    continuum: Continuum,
    /// Continuum index → configuration index.
    live: Vec<usize>,
}

impl Pool {
    /// The pool, every server in service.
    pub fn new(config: PoolConfig) -> Self {
        let out_until = vec![None; config.servers.len()];
        let mut pool = Self {
            continuum: Continuum::new(config.distribution, &[]),
            config,
            out_until,
            live: Vec::new(),
        };
        pool.rebuild();
        pool
    }

    /// What it was told.
    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// How many servers are in service.
    pub fn in_service(&self) -> usize {
        self.live.len()
    }

    /// Until when server `index` is out of service (`None`: it is in).
    pub fn out_until(&self, index: usize) -> Option<Instant> {
        self.out_until.get(index).copied().flatten()
    }

    /// The server (by configuration index) `key` goes to among those in service; `random`
    /// is the draw of the random distribution. `None` when every server is out.
    pub fn server_for(&self, key: &[u8], random: u32) -> Option<usize> {
        if self.live.is_empty() {
            return None;
        }
        let c = &self.config;
        let at = self.continuum.server_for(c.hash, c.hash_tag, key, random);
        self.live.get(at).copied()
    }

    /// Where `argv` goes. MGET, DEL, UNLINK, TOUCH, EXISTS and MSET with several keys are
    /// split by server; anything else goes to the server of its first key (that of its
    /// hash-tagged part; a command without keys hashes the empty key).
    pub fn plan(&self, table: &CommandTable, argv: &[Bytes], random: u32) -> Plan {
        let Some(name) = argv.first() else {
            return self.no_server(false);
        };
        let split = SPLIT
            .into_iter()
            .find(|n| name.eq_ignore_ascii_case(n.as_bytes()));
        let pairs = usize::from(split == Some("mset"));
        if let Some(split_name) = split.filter(|_| argv.len() > 2 + pairs * 2) {
            let mget = split_name == "mget";
            let mut missing = false;
            let split = table.split_by(argv, |key| {
                self.server_for(key, random).unwrap_or_else(|| {
                    missing = true;
                    usize::MAX
                })
            });
            if let Some(split) = split {
                if missing {
                    return self.no_server(mget);
                }
                let lower = Bytes::from_static(split_name.as_bytes());
                let parts = split
                    .parts()
                    .iter()
                    .enumerate()
                    .map(|(i, part)| {
                        let mut sub: Vec<Bytes> = split.argv(i, argv).cloned().collect();
                        sub[0] = lower.clone();
                        (part.shard, sub)
                    })
                    .collect();
                return Plan::Fragments(Fragments { split, parts, mget });
            }
        }
        let first = table
            .keys(argv)
            .ok()
            .and_then(|keys| keys.positions().next())
            .and_then(|at| argv.get(at));
        match self.server_for(first.map_or(&[][..], |k| k.as_ref()), random) {
            Some(server) => Plan::One {
                server,
                blocking: table
                    .lookup(argv)
                    .is_some_and(|s| s.flags.contains(CommandFlags::BLOCKING)),
            },
            None => self.no_server(false),
        }
    }

    fn no_server(&self, hang_up: bool) -> Plan {
        Plan::NoServer {
            reply: error_frame("ERR Connection refused"),
            hang_up,
        }
    }

    /// Server `index` has failed `failures` times in a row (its driver counts: connections
    /// that could not be opened or ended in error; a reply starts the count again). With
    /// ejection on and the count at the limit, the server leaves the continuum: the moment
    /// it comes back is returned (and is then [`Pool::poll_timeout`]'s).
    pub fn eject_if_failing(
        &mut self,
        index: usize,
        failures: u64,
        now: Instant,
    ) -> Option<Instant> {
        let ejection = self.config.ejection?;
        let limit = u64::from(ejection.failure_limit.max(1));
        let slot = self.out_until.get_mut(index)?;
        if failures < limit || slot.is_some() {
            return None;
        }
        let back = now + ejection.retry;
        *slot = Some(back);
        self.rebuild();
        Some(back)
    }

    /// Servers whose retry time has come are back in service; whether any came back.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let mut back = false;
        for out in &mut self.out_until {
            if out.is_some_and(|at| at <= now) {
                *out = None;
                back = true;
            }
        }
        if back {
            self.rebuild();
        }
        back
    }

    /// When the next ejected server comes back, if one is out.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.out_until.iter().flatten().min().copied()
    }

    /// The continuum of the servers in service.
    fn rebuild(&mut self) {
        let mut weighted = Vec::new();
        self.live.clear();
        for (index, server) in self.config.servers.iter().enumerate() {
            if self.out_until[index].is_some() {
                continue;
            }
            weighted.push(Weighted {
                name: server.name.clone(),
                weight: server.weight,
            });
            self.live.push(index);
        }
        self.continuum = Continuum::new(self.config.distribution, &weighted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn pool(servers: usize, ejection: Option<Ejection>) -> Pool {
        Pool::new(PoolConfig {
            hash: Hash::Fnv1aAnd64,
            hash_tag: Some(*b"{}"),
            distribution: Distribution::Ketama,
            servers: (0..servers)
                .map(|i| ServerConfig {
                    name: format!("127.0.0.1:{}", 6379 + i),
                    weight: 1,
                })
                .collect(),
            ejection,
        })
    }

    const TABLE: CommandTable = CommandTable::REDIS_7_0;

    #[test]
    fn a_command_goes_to_its_first_keys_server_and_a_hash_tag_keeps_keys_together() {
        let p = pool(3, None);
        let of = |line: &str| match p.plan(&TABLE, &argv(line), 0) {
            Plan::One { server, .. } => server,
            other => panic!("{other:?}"),
        };
        assert_eq!(of("GET {user1}.a"), of("GET user1"));
        assert_eq!(of("SET {user1}.b 1"), of("GET user1"));
        // Keys of one server still make a fragment, named as nutcracker names it.
        let Plan::Fragments(f) = p.plan(&TABLE, &argv("MGET {t}a {t}b"), 0) else {
            panic!("a fragment");
        };
        assert_eq!(f.parts(), [(of("GET t"), argv("mget {t}a {t}b"))]);
        let servers: std::collections::HashSet<usize> =
            (0..1000).map(|i| of(&format!("GET key:{i}"))).collect();
        assert_eq!(servers.len(), 3, "keys spread over every server");
        assert_eq!(
            p.plan(&TABLE, &argv("BLPOP q 0"), 0),
            Plan::One {
                server: of("GET q"),
                blocking: true
            }
        );
    }

    #[test]
    fn fragments_are_named_in_lower_case_and_merged_as_nutcracker_merges_them() {
        let p = pool(2, None);
        let (a, b) = (0..100)
            .map(|i| format!("k{i}"))
            .fold((None, None), |(a, b), k| {
                match p.server_for(k.as_bytes(), 0) {
                    Some(0) if a.is_none() => (Some(k), b),
                    Some(1) if b.is_none() => (a, Some(k)),
                    _ => (a, b),
                }
            });
        let (a, b) = (a.expect("a key on 0"), b.expect("a key on 1"));
        let Plan::Fragments(f) = p.plan(&TABLE, &argv(&format!("DEL {a} {b} {a}")), 0) else {
            panic!("two servers");
        };
        let parts: Vec<(usize, String)> = f
            .parts()
            .iter()
            .map(|(s, argv)| (*s, String::from_utf8_lossy(&argv.join(&b' ')).into_owned()))
            .collect();
        assert_eq!(
            parts,
            [(0, format!("del {a} {a}")), (1, format!("del {b}"))]
        );
        let sum = f.merge(vec![Ok(Frame::Integer(1)), Ok(Frame::Integer(1))]);
        assert_eq!(sum.reply, Frame::Integer(2));
        let wrong = f.merge(vec![Ok(Frame::Integer(1)), Ok(error_frame("READONLY no"))]);
        assert_eq!(wrong.reply, error_frame("ERR Invalid argument"));
        let lost = f.merge(vec![
            Ok(Frame::Integer(1)),
            Err("Connection refused".into()),
        ]);
        assert_eq!(
            (lost.reply, lost.failed, lost.hang_up),
            (error_frame("ERR Connection refused"), true, false)
        );
        let Plan::Fragments(m) = p.plan(&TABLE, &argv(&format!("MGET {a} {b}")), 0) else {
            panic!("two servers");
        };
        let lost = m.merge(vec![
            Err("Connection reset by peer".into()),
            Ok(Frame::Null),
        ]);
        assert!(
            lost.hang_up,
            "a failed MGET closes the client, as nutcracker does"
        );
    }

    #[test]
    fn a_failing_server_leaves_the_continuum_until_its_retry_time() {
        let retry = Duration::from_secs(30);
        let mut p = pool(
            2,
            Some(Ejection {
                failure_limit: 3,
                retry,
            }),
        );
        let now = Instant::now();
        assert_eq!(p.eject_if_failing(0, 2, now), None, "below the limit");
        assert_eq!(p.eject_if_failing(0, 3, now), Some(now + retry));
        assert_eq!(p.eject_if_failing(0, 9, now), None, "out already");
        assert_eq!(p.in_service(), 1);
        assert!((0..50).all(|i| p.server_for(format!("k{i}").as_bytes(), 0) == Some(1)));
        assert_eq!(p.poll_timeout(), Some(now + retry));
        assert!(!p.handle_timeout(now + retry - Duration::from_millis(1)));
        assert_eq!(p.eject_if_failing(1, 3, now), Some(now + retry));
        assert_eq!(
            p.plan(&TABLE, &argv("MGET a b c"), 0),
            Plan::NoServer {
                reply: error_frame("ERR Connection refused"),
                hang_up: true
            }
        );
        assert!(matches!(
            p.plan(&TABLE, &argv("GET a"), 0),
            Plan::NoServer { hang_up: false, .. }
        ));
        assert!(p.handle_timeout(now + retry));
        assert_eq!((p.in_service(), p.poll_timeout()), (2, None));
        // Without ejection, failures change nothing.
        let mut q = pool(2, None);
        assert_eq!(q.eject_if_failing(0, 1000, now), None);
    }
}
