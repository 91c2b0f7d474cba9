//! What the engine answers itself: `HELLO`, as the server it fronts would.

use bytes::Bytes;
use redis_resp::Frame;

use crate::{ClientId, error_frame};

/// What the cluster's nodes run, from `INFO server`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Server {
    /// `redis` or `valkey`.
    pub(crate) name: String,
    pub(crate) version: String,
}

impl Default for Server {
    fn default() -> Self {
        Self {
            name: "redis".into(),
            version: "7.0.15".into(),
        }
    }
}

impl Server {
    /// Reads `server_name` (Valkey's) and `redis_version` / `valkey_version` from
    /// `INFO server` text ([`redis_cluster_route::server_of_info`]).
    pub(crate) fn from_info(text: &[u8]) -> Self {
        let text = String::from_utf8_lossy(text);
        let (name, version) = redis_cluster_route::server_of_info(&text);
        Self {
            name: name.to_string(),
            version: version.to_string(),
        }
    }
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`, checked and answered as Redis 7.0
/// does; `proto` is the client's RESP version, switched on success. AUTH and SETNAME are
/// accepted as given: authenticating clients is the driver's business.
pub(crate) fn answer(argv: &[Bytes], proto: &mut u8, client: ClientId, server: &Server) -> Frame {
    let mut version = None;
    if let Some(arg) = argv.get(1) {
        let parsed = std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<i64>().ok());
        match parsed {
            Some(v @ 2..=3) => version = Some(v as u8),
            Some(_) => return error_frame("NOPROTO unsupported protocol version"),
            None => return error_frame("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut at = 2;
    while at < argv.len() {
        let more = argv.len() - 1 - at;
        let opt = &argv[at];
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            at += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            at += 2;
        } else {
            let text = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            );
            return error_frame(&text);
        }
    }
    if let Some(v) = version {
        *proto = v;
    }
    let bulk = |s: &str| Frame::BulkString(Bytes::copy_from_slice(s.as_bytes()));
    let pairs = vec![
        (bulk("server"), bulk(&server.name)),
        (bulk("version"), bulk(&server.version)),
        (bulk("proto"), Frame::Integer(i64::from(*proto))),
        (
            bulk("id"),
            Frame::Integer(i64::try_from(client.0).unwrap_or(i64::MAX)),
        ),
        (bulk("mode"), bulk("standalone")),
        (bulk("role"), bulk("master")),
        (bulk("modules"), Frame::Array(Vec::new())),
    ];
    if *proto == 3 {
        Frame::Map(pairs)
    } else {
        Frame::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::Server;

    /// Valkey names itself in `server_name` and keeps a `redis_version` for old clients;
    /// Redis has `redis_version` alone. (The real captures of all four servers are read by
    /// the route crate's `each_real_info_server_picks_its_own_table`.)
    #[test]
    fn info_server_names_the_server_and_its_version() {
        let valkey = b"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\n\
                       valkey_version:9.1.2\r\nredis_mode:cluster\r\n";
        let redis = b"# Server\r\nredis_version:8.2.3\r\nredis_mode:cluster\r\n";
        for (text, name, version) in [
            (&valkey[..], "valkey", "9.1.2"),
            (&redis[..], "redis", "8.2.3"),
        ] {
            assert_eq!(
                Server::from_info(text),
                Server {
                    name: name.into(),
                    version: version.into()
                }
            );
        }
    }
}
