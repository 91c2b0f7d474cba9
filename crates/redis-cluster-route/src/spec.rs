//! What a server says about a command (`COMMAND`'s reply, format of Redis 7.0): arity, flags,
//! ACL categories, the legacy key range, tips and key specs.

use core::fmt;

/// One command or subcommand, as the server describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// The name, lowercase; a subcommand's is `container|sub` (`object|encoding`).
    pub name: &'static str,
    /// The number of arguments, the name included; negative: at least that many.
    pub arity: i16,
    /// The command flags.
    pub flags: CommandFlags,
    /// The legacy key range: first key, last key (negative: from the end), step; `0, 0, 0`
    /// for none. Redis 7.0 routes a command without `movablekeys` by this range in cluster
    /// mode.
    pub legacy_keys: (i16, i16, i16),
    /// The ACL categories.
    pub acl_categories: AclCategories,
    /// The request and response policy tips.
    pub tips: Tips,
    /// The key specs, in the server's order.
    pub key_specs: &'static [KeySpec],
    /// The subcommands, sorted by name.
    pub subcommands: &'static [Self],
}

impl CommandSpec {
    /// Whether `argc` arguments (the name included) satisfy the arity, as the server checks it
    /// before running a command.
    pub const fn accepts_argc(&self, argc: usize) -> bool {
        let arity = self.arity as isize;
        let argc = argc as isize;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Whether the command can have key arguments at all: a key spec that is not `not_key`,
    /// or a native key-finding function (`movablekeys`). What `COMMAND GETKEYS` checks first.
    pub fn has_key_arguments(&self) -> bool {
        self.flags.contains(CommandFlags::MOVABLEKEYS)
            || self
                .key_specs
                .iter()
                .any(|spec| !spec.flags.contains(KeySpecFlags::NOT_KEY))
    }

    /// The subcommand named `name` (ASCII case-insensitive), without the container's name.
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static Self> {
        let skip = self.name.len() + 1;
        find(self.subcommands, name, skip)
    }
}

/// The entry of `table` (sorted by name) whose name, after its first `skip` bytes, equals
/// `name` ignoring ASCII case.
fn find(table: &'static [CommandSpec], name: &[u8], skip: usize) -> Option<&'static CommandSpec> {
    table
        .binary_search_by(|spec| {
            let own = spec.name.as_bytes().get(skip..).unwrap_or_default();
            let lower = name.iter().map(u8::to_ascii_lowercase);
            own.iter().copied().cmp(lower)
        })
        .ok()
        .and_then(|at| table.get(at))
}

macro_rules! bits {
    (
        $(#[$meta:meta])* $name:ident($repr:ty) {
            $($(#[$doc:meta])* $flag:ident = $bit:literal, $text:literal;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub $repr);

        impl $name {
            $($(#[$doc])* pub const $flag: Self = Self(1 << $bit);)*

            /// No flag.
            pub const EMPTY: Self = Self(0);

            const NAMES: &[(Self, &'static str)] = &[$((Self::$flag, $text)),*];

            /// Both sets of flags.
            pub const fn or(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any flag of `other` is set.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// The flag the server calls `name`, as `COMMAND` spells it.
            pub fn from_name(name: &str) -> Option<Self> {
                Self::NAMES.iter().find(|(_, n)| *n == name).map(|(flag, _)| *flag)
            }

            /// The names of the flags set, in bit order, as `COMMAND` spells and orders them.
            pub fn names(self) -> impl Iterator<Item = &'static str> {
                Self::NAMES
                    .iter()
                    .filter(move |(flag, _)| self.contains(*flag))
                    .map(|(_, name)| *name)
            }
        }

        /// Both sets of flags, as [`Self::or`].
        impl core::ops::BitOr for $name {
            type Output = Self;

            fn bitor(self, other: Self) -> Self {
                self.or(other)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, other: Self) {
                *self = self.or(other);
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_set().entries(self.names()).finish()
            }
        }
    };
}

bits! {
    /// Command flags (`COMMAND`'s third field), numbered in the order the servers list them
    /// (Redis's and Valkey's `addReplyFlagsForCommand`), so that
    /// [`CommandFlags::names`] gives a reply's order.
    ///
    /// ```
    /// use redis_cluster_route::CommandFlags;
    ///
    /// let set = CommandFlags::WRITE | CommandFlags::DENYOOM;
    /// assert!(set.contains(CommandFlags::WRITE));
    /// assert!(set.intersects(CommandFlags::WRITE | CommandFlags::ADMIN));
    /// assert!(!set.intersects(CommandFlags::ADMIN | CommandFlags::NOSCRIPT));
    /// assert_eq!(set.names().collect::<Vec<_>>(), ["write", "denyoom"]);
    /// ```
    CommandFlags(u32) {
        /// May modify the keyspace.
        WRITE = 0, "write";
        /// Reads without modifying.
        READONLY = 1, "readonly";
        /// May grow memory use: refused when over `maxmemory`.
        DENYOOM = 2, "denyoom";
        /// A module's command (Redis 8's vector sets are one).
        MODULE = 3, "module";
        /// Administrative.
        ADMIN = 4, "admin";
        /// Pub/Sub.
        PUBSUB = 5, "pubsub";
        /// Not allowed in scripts.
        NOSCRIPT = 6, "noscript";
        /// May block the client.
        BLOCKING = 7, "blocking";
        /// Allowed while loading the dataset.
        LOADING = 8, "loading";
        /// Allowed on a stale replica.
        STALE = 9, "stale";
        /// Not shown by MONITOR.
        SKIP_MONITOR = 10, "skip_monitor";
        /// Not logged by SLOWLOG.
        SKIP_SLOWLOG = 11, "skip_slowlog";
        /// Not logged by COMMANDLOG (Valkey 8.1).
        SKIP_COMMANDLOG = 12, "skip_commandlog";
        /// Served for an importing slot after ASKING.
        ASKING = 13, "asking";
        /// O(1) or O(log N).
        FAST = 14, "fast";
        /// Allowed before AUTH.
        NO_AUTH = 15, "no_auth";
        /// May be propagated to replicas though it is not a write (PUBLISH, EVAL).
        MAY_REPLICATE = 16, "may_replicate";
        /// Available in a Sentinel.
        SENTINEL = 17, "sentinel";
        /// Available only in a Sentinel.
        ONLY_SENTINEL = 18, "only_sentinel";
        /// May run with no key at all (EVAL with 0 keys).
        NO_MANDATORY_KEYS = 19, "no_mandatory_keys";
        /// Refused during async loading.
        NO_ASYNC_LOADING = 20, "no_async_loading";
        /// Not allowed in MULTI.
        NO_MULTI = 21, "no_multi";
        /// The key positions depend on the arguments.
        MOVABLEKEYS = 22, "movablekeys";
        /// Allowed while a script or function is busy.
        ALLOW_BUSY = 23, "allow_busy";
    }
}

bits! {
    /// ACL categories (`COMMAND`'s seventh field), in the servers' order.
    AclCategories(u32) {
        /// `@keyspace`.
        KEYSPACE = 0, "@keyspace";
        /// `@read`.
        READ = 1, "@read";
        /// `@write`.
        WRITE = 2, "@write";
        /// `@set`.
        SET = 3, "@set";
        /// `@sortedset`.
        SORTEDSET = 4, "@sortedset";
        /// `@list`.
        LIST = 5, "@list";
        /// `@hash`.
        HASH = 6, "@hash";
        /// `@string`.
        STRING = 7, "@string";
        /// `@bitmap`.
        BITMAP = 8, "@bitmap";
        /// `@hyperloglog`.
        HYPERLOGLOG = 9, "@hyperloglog";
        /// `@geo`.
        GEO = 10, "@geo";
        /// `@stream`.
        STREAM = 11, "@stream";
        /// `@pubsub`.
        PUBSUB = 12, "@pubsub";
        /// `@admin`.
        ADMIN = 13, "@admin";
        /// `@fast`.
        FAST = 14, "@fast";
        /// `@slow`.
        SLOW = 15, "@slow";
        /// `@blocking`.
        BLOCKING = 16, "@blocking";
        /// `@dangerous`.
        DANGEROUS = 17, "@dangerous";
        /// `@connection`.
        CONNECTION = 18, "@connection";
        /// `@transaction`.
        TRANSACTION = 19, "@transaction";
        /// `@scripting`.
        SCRIPTING = 20, "@scripting";
    }
}

bits! {
    /// Key spec flags: how the command uses the keys the spec finds.
    KeySpecFlags(u16) {
        /// Read-only.
        RO = 0, "RO";
        /// Read-write.
        RW = 1, "RW";
        /// Overwrite: the old value is not read.
        OW = 2, "OW";
        /// Remove.
        RM = 3, "RM";
        /// The value is returned, copied or used.
        ACCESS = 4, "access";
        /// The value is updated.
        UPDATE = 5, "update";
        /// Data is added.
        INSERT = 6, "insert";
        /// Data is deleted.
        DELETE = 7, "delete";
        /// Not a key (a shard channel), but hashed like one.
        NOT_KEY = 8, "not_key";
        /// The spec may not find every key: the server falls back to its own function.
        INCOMPLETE = 9, "incomplete";
        /// The flags depend on the arguments.
        VARIABLE_FLAGS = 10, "variable_flags";
    }
}

/// Where a key spec starts looking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument index.
    Index(i32),
    /// After this keyword, searched from `start_from` (negative: from the end, backwards).
    Keyword {
        /// The keyword, uppercase as the server lists it; matched ignoring case.
        keyword: &'static str,
        /// Where the search starts.
        start_from: i32,
    },
    /// The spec cannot say (SORT's BY / GET / STORE).
    Unknown,
}

/// How a key spec finds the keys from where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// A range: the last key relative to the first (negative: from the end), the step, and
    /// with `last_key == -1`, `limit` > 1 means only 1/limit of the remaining arguments.
    Range {
        /// The last key's offset, or from the end when negative.
        last_key: i32,
        /// The step between keys.
        step: i32,
        /// The fraction of the rest that holds keys (0: all).
        limit: i32,
    },
    /// A count of keys at `keynum_index`, the keys from `first_key`, every `step`.
    Keynum {
        /// Where the count is, relative to the start.
        keynum_index: i32,
        /// Where the first key is, relative to the start.
        first_key: i32,
        /// The step between keys.
        step: i32,
    },
    /// The spec cannot say.
    Unknown,
}

/// One key spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// The server's remark on the spec (`notes`), empty when it has none.
    pub notes: &'static str,
    /// How the keys found are used.
    pub flags: KeySpecFlags,
    /// Where the search starts.
    pub begin_search: BeginSearch,
    /// How the keys are found from there.
    pub find_keys: FindKeys,
}

/// `request_policy` tip: where a proxy sends the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestPolicy {
    /// To every node, replicas included.
    AllNodes,
    /// To every master.
    AllShards,
    /// Split by slot across the masters that hold its keys.
    MultiShard,
    /// The client must know better.
    Special,
}

/// `response_policy` tip: how a proxy merges the replies of a fanned-out command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponsePolicy {
    /// The first non-error reply.
    OneSucceeded,
    /// An error if any reply is one, else any reply.
    AllSucceeded,
    /// The logical AND of integer replies.
    AggLogicalAnd,
    /// The logical OR of integer replies.
    AggLogicalOr,
    /// The smallest integer reply.
    AggMin,
    /// The largest integer reply.
    AggMax,
    /// The sum of integer replies.
    AggSum,
    /// The client must know better.
    Special,
}

/// One tip, as the server lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tip {
    /// `request_policy:…`.
    RequestPolicy(RequestPolicy),
    /// `response_policy:…`.
    ResponsePolicy(ResponsePolicy),
    /// `nondeterministic_output`.
    NondeterministicOutput,
    /// `nondeterministic_output_order`.
    NondeterministicOutputOrder,
}

impl Tip {
    /// The tip as `COMMAND` spells it.
    ///
    /// ```
    /// use redis_cluster_route::{RequestPolicy, Tip};
    ///
    /// let tip = Tip::RequestPolicy(RequestPolicy::MultiShard);
    /// assert_eq!(tip.text(), "request_policy:multi_shard");
    /// ```
    pub const fn text(self) -> &'static str {
        match self {
            Self::RequestPolicy(RequestPolicy::AllNodes) => "request_policy:all_nodes",
            Self::RequestPolicy(RequestPolicy::AllShards) => "request_policy:all_shards",
            Self::RequestPolicy(RequestPolicy::MultiShard) => "request_policy:multi_shard",
            Self::RequestPolicy(RequestPolicy::Special) => "request_policy:special",
            Self::ResponsePolicy(ResponsePolicy::OneSucceeded) => "response_policy:one_succeeded",
            Self::ResponsePolicy(ResponsePolicy::AllSucceeded) => "response_policy:all_succeeded",
            Self::ResponsePolicy(ResponsePolicy::AggLogicalAnd) => {
                "response_policy:agg_logical_and"
            }
            Self::ResponsePolicy(ResponsePolicy::AggLogicalOr) => "response_policy:agg_logical_or",
            Self::ResponsePolicy(ResponsePolicy::AggMin) => "response_policy:agg_min",
            Self::ResponsePolicy(ResponsePolicy::AggMax) => "response_policy:agg_max",
            Self::ResponsePolicy(ResponsePolicy::AggSum) => "response_policy:agg_sum",
            Self::ResponsePolicy(ResponsePolicy::Special) => "response_policy:special",
            Self::NondeterministicOutput => "nondeterministic_output",
            Self::NondeterministicOutputOrder => "nondeterministic_output_order",
        }
    }
}

/// The command's tips, in the server's order (which varies from command to command).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tips(pub &'static [Tip]);

impl Tips {
    /// No tip.
    pub const NONE: Self = Self(&[]);

    /// The `request_policy` tip.
    pub fn request_policy(self) -> Option<RequestPolicy> {
        self.0.iter().find_map(|tip| match tip {
            Tip::RequestPolicy(policy) => Some(*policy),
            _ => None,
        })
    }

    /// The `response_policy` tip.
    pub fn response_policy(self) -> Option<ResponsePolicy> {
        self.0.iter().find_map(|tip| match tip {
            Tip::ResponsePolicy(policy) => Some(*policy),
            _ => None,
        })
    }

    /// Whether the output may differ between runs (`nondeterministic_output`).
    pub fn nondeterministic_output(self) -> bool {
        self.0.contains(&Tip::NondeterministicOutput)
    }

    /// Whether the output's order may differ between runs (`nondeterministic_output_order`).
    pub fn nondeterministic_output_order(self) -> bool {
        self.0.contains(&Tip::NondeterministicOutputOrder)
    }
}
