//! [`CommandSpec::info`]: a command's entry in the server's `COMMAND` and `COMMAND INFO`
//! replies, rebuilt from the table.

use alloc::vec::Vec;

use redis_resp::Frame;

use crate::spec::{BeginSearch, CommandSpec, FindKeys, KeySpec};

type Reply = Frame<&'static [u8]>;

/// Builds the collections of one protocol: RESP3's sets and maps, or RESP2's arrays and flat
/// arrays of names and values, as the server's `addReplySetLen` and `addReplyMapLen` do.
#[derive(Clone, Copy)]
struct Shape {
    resp3: bool,
    /// The subcommands of a command that has none are an empty array, not an empty set
    /// (Valkey 9).
    no_subcommands_array: bool,
}

impl Shape {
    fn set(self, items: Vec<Reply>) -> Reply {
        if self.resp3 {
            Frame::Set(items)
        } else {
            Frame::Array(items)
        }
    }

    fn map(self, pairs: Vec<(&'static str, Reply)>) -> Reply {
        let pairs = pairs.into_iter().map(|(name, value)| (bulk(name), value));
        if self.resp3 {
            Frame::Map(pairs.collect())
        } else {
            Frame::Array(pairs.flat_map(|(name, value)| [name, value]).collect())
        }
    }

    fn key_spec(self, spec: &KeySpec) -> Reply {
        let mut pairs = Vec::with_capacity(4);
        if !spec.notes.is_empty() {
            pairs.push(("notes", bulk(spec.notes)));
        }
        pairs.push(("flags", self.set(spec.flags.names().map(status).collect())));
        let (kind, begin) = match spec.begin_search {
            BeginSearch::Index(index) => ("index", self.map([("index", int(index))].into())),
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => (
                "keyword",
                self.map([("keyword", bulk(keyword)), ("startfrom", int(start_from))].into()),
            ),
            BeginSearch::Unknown => ("unknown", self.map(Vec::new())),
        };
        let begin = self.map([("type", bulk(kind)), ("spec", begin)].into());
        pairs.push(("begin_search", begin));
        let (kind, find) = match spec.find_keys {
            FindKeys::Range {
                last_key,
                step,
                limit,
            } => (
                "range",
                self.map(
                    [
                        ("lastkey", int(last_key)),
                        ("keystep", int(step)),
                        ("limit", int(limit)),
                    ]
                    .into(),
                ),
            ),
            FindKeys::Keynum {
                keynum_index,
                first_key,
                step,
            } => (
                "keynum",
                self.map(
                    [
                        ("keynumidx", int(keynum_index)),
                        ("firstkey", int(first_key)),
                        ("keystep", int(step)),
                    ]
                    .into(),
                ),
            ),
            FindKeys::Unknown => ("unknown", self.map(Vec::new())),
        };
        let find = self.map([("type", bulk(kind)), ("spec", find)].into());
        pairs.push(("find_keys", find));
        self.map(pairs)
    }

    fn command(self, spec: &CommandSpec) -> Reply {
        let (first, last, step) = spec.legacy_keys;
        let subcommands = if spec.subcommands.is_empty() && !self.no_subcommands_array {
            // Redis and Valkey 8 answer an empty set for a command without subcommands, and
            // an array for the others; Valkey 9 an array always.
            self.set(Vec::new())
        } else {
            Frame::Array(spec.subcommands.iter().map(|s| self.command(s)).collect())
        };
        Frame::Array(
            [
                bulk(spec.name),
                int(spec.arity),
                self.set(spec.flags.names().map(status).collect()),
                int(first),
                int(last),
                int(step),
                self.set(spec.acl_categories.names().map(status).collect()),
                self.set(spec.tips.0.iter().map(|tip| bulk(tip.text())).collect()),
                self.set(spec.key_specs.iter().map(|k| self.key_spec(k)).collect()),
                subcommands,
            ]
            .into(),
        )
    }
}

fn bulk(text: &'static str) -> Reply {
    Frame::BulkString(text.as_bytes())
}

fn status(text: &'static str) -> Reply {
    Frame::SimpleString(text.as_bytes())
}

fn int(n: impl Into<i64>) -> Reply {
    Frame::Integer(n.into())
}

impl CommandSpec {
    /// The command's entry in the server's `COMMAND` and `COMMAND INFO` replies: name,
    /// arity, flags, the legacy key range, ACL categories, tips, key specs and subcommands,
    /// each in the server's order and type (RESP3's sets and maps when `resp3`, else RESP2's
    /// arrays), so that it encodes to the server's bytes.
    ///
    /// The server lists subcommands, like the commands of a bare `COMMAND`, in the order of
    /// its hash table, which a random seed changes from run to run; the table gives them
    /// sorted by name. This is the entry as Redis and Valkey 8 shape it;
    /// [`CommandTable::info`](crate::CommandTable::info) shapes it as the table's server does.
    ///
    /// ```
    /// use redis_cluster_route::CommandTable;
    ///
    /// let get = CommandTable::REDIS_7_0.command(b"get").expect("GET");
    /// let mut out = Vec::new();
    /// redis_resp::encode(&get.info(false), &mut out);
    /// assert!(out.starts_with(b"*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n"));
    /// ```
    pub fn info(&self, resp3: bool) -> Frame<&'static [u8]> {
        self.info_shaped(resp3, false)
    }

    pub(crate) fn info_shaped(
        &self,
        resp3: bool,
        no_subcommands_array: bool,
    ) -> Frame<&'static [u8]> {
        Shape {
            resp3,
            no_subcommands_array,
        }
        .command(self)
    }
}
