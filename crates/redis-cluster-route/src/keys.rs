//! Finding a command's keys and its hash slot, as the server does.
//!
//! Two answers, because the server itself has two:
//! - [`CommandTable::keys`] is `COMMAND GETKEYS`: the key specs, and when they cannot answer
//!   (a spec `incomplete`, `unknown` or out of bounds, or flags that vary with the
//!   arguments) the server's own key-finding function for that command;
//! - [`CommandTable::slot`] is how a Redis 7.0 cluster node picks the slot of a command:
//!   that function for `movablekeys` commands, else the legacy key range (first, last,
//!   step) — which also covers the shard channels of SPUBLISH / SSUBSCRIBE.

use redis_hash_slot::{Slot, key_slot};

use crate::{
    spec::{BeginSearch, CommandFlags, CommandSpec, FindKeys, KeySpecFlags},
    table::CommandTable,
};

/// Most runs of keys one command can have: one per key spec (three at most in the tables),
/// or what a native function finds (two). Small, so that [`Keys`] is 72 bytes on the stack.
const MAX_RUNS: usize = 4;

/// Why no keys could be given for a command. The messages are the server's `COMMAND GETKEYS`
/// errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The table has no command of this name (a module's command, or a typo). Supply its
    /// spec with [`Keys::from_spec`].
    #[error("Invalid command specified")]
    UnknownCommand,
    /// The container command has no such subcommand.
    #[error("Invalid command specified")]
    UnknownSubcommand,
    /// The arguments do not satisfy the command's arity.
    #[error("Invalid number of arguments specified for command")]
    WrongArity,
    /// The command takes no key arguments (`COMMAND GETKEYS` only).
    #[error("The command has no key arguments")]
    NoKeyArguments,
    /// The arguments name no key where the command needs one (`COMMAND GETKEYS` only).
    #[error("Invalid arguments specified for command")]
    InvalidArguments,
    /// A spec supplied by the caller has more key specs than this crate keeps (4).
    #[error("more than {MAX_RUNS} key specs")]
    TooManySpecs,
}

/// Key positions in `argv`: first, last (inclusive), step, and how they are used; packed in
/// two words written whole, so that copying a [`Keys`] reads back exactly what was stored
/// (written field by field, the copy stalled on store forwarding: `benches/route.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Run {
    /// `first | last << 32`.
    span: u64,
    /// `step | flags << 32`.
    rest: u64,
}

impl Run {
    const fn first(self) -> u32 {
        self.span as u32
    }

    const fn last(self) -> u32 {
        (self.span >> 32) as u32
    }

    const fn step(self) -> u32 {
        self.rest as u32
    }

    const fn flags(self) -> KeySpecFlags {
        KeySpecFlags((self.rest >> 32) as u16)
    }
}

/// The keys of one command: their positions in its `argv`, in the server's order. Held
/// inline: finding them allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    runs: [Run; MAX_RUNS],
    len: u8,
}

impl Keys {
    #[inline]
    fn push(&mut self, first: usize, last: usize, step: usize, flags: KeySpecFlags) -> bool {
        let (Ok(first), Ok(last), Ok(step)) = (
            u32::try_from(first),
            u32::try_from(last),
            u32::try_from(step.max(1)),
        ) else {
            return false;
        };
        match self.runs.get_mut(usize::from(self.len)) {
            Some(run) => {
                *run = Run {
                    span: u64::from(first) | u64::from(last) << 32,
                    rest: u64::from(step) | u64::from(flags.0) << 32,
                };
                self.len += 1;
                true
            }
            None => false,
        }
    }

    fn one(at: usize, flags: KeySpecFlags) -> Self {
        let mut keys = Self::default();
        keys.push(at, at, 1, flags);
        keys
    }

    fn runs(&self) -> &[Run] {
        self.runs.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// The positions of the keys in `argv`, in the server's order (a position can appear
    /// twice when two specs find it, as with the server).
    pub fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.with_flags().map(|(at, _)| at)
    }

    /// The positions with the flags of the spec that found each; a native function's keys
    /// carry the flags the server gives them (often none).
    pub fn with_flags(&self) -> impl Iterator<Item = (usize, KeySpecFlags)> + '_ {
        self.runs().iter().flat_map(|run| {
            (run.first()..=run.last())
                .step_by(run.step() as usize)
                .map(move |at| (at as usize, run.flags()))
        })
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.runs()
            .iter()
            .map(|run| ((run.last() - run.first()) / run.step() + 1) as usize)
            .sum()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The keys that `spec` finds in `argv` by its key specs, with the server's rules, as
    /// for a command the table does not know (a module's); `None` when a spec cannot answer
    /// (the server would then call the module's own function).
    pub fn from_spec<A: AsRef<[u8]>>(
        spec: &CommandSpec,
        argv: &[A],
    ) -> Result<Option<Self>, KeyError> {
        if !spec.accepts_argc(argv.len()) {
            return Err(KeyError::WrongArity);
        }
        let mut keys = Self::default();
        Ok(by_specs(spec, argv, &mut keys)?.then_some(keys))
    }

    /// [`CommandTable::routing_keys`] for a command already looked up and checked (by
    /// [`CommandTable::check`]): a server that has the spec in hand saves the second
    /// look-up.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Keys};
    ///
    /// let argv = ["SET", "k", "v"];
    /// let spec = CommandTable::REDIS_7_0.check(&argv).expect("a valid SET");
    /// assert_eq!(Keys::routing(spec, &argv).positions().collect::<Vec<_>>(), [1]);
    /// ```
    pub fn routing<A: AsRef<[u8]>>(spec: &CommandSpec, argv: &[A]) -> Self {
        if spec.flags.contains(CommandFlags::MOVABLEKEYS) {
            native(spec, argv).unwrap_or_default()
        } else {
            legacy(spec, argv)
        }
    }

    /// The hash slot of all the keys: none, one, or more than one.
    pub fn slot<A: AsRef<[u8]>>(&self, argv: &[A]) -> SlotAnswer {
        let mut first = None;
        for run in self.runs() {
            let mut at = run.first() as usize;
            while at <= run.last() as usize {
                if let Some(key) = argv.get(at) {
                    let slot = key_slot(key.as_ref());
                    match first {
                        None => first = Some(slot),
                        Some(first) if first != slot => return SlotAnswer::CrossSlot,
                        Some(_) => {}
                    }
                }
                at += run.step() as usize;
            }
        }
        first.map_or(SlotAnswer::NoKeys, SlotAnswer::Slot)
    }
}

/// Where a command goes in a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotAnswer {
    /// It has no key: any node can serve it.
    NoKeys,
    /// All its keys hash to this slot.
    Slot(Slot),
    /// Its keys hash to different slots: a node answers
    /// `-CROSSSLOT Keys in request don't hash to the same slot`.
    CrossSlot,
}

impl CommandTable {
    /// The keys of `argv` as `COMMAND GETKEYS` finds them (but without its errors for a
    /// command without keys: the answer is then empty).
    pub fn keys<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Keys, KeyError> {
        let spec = self.checked(argv)?;
        Ok(getkeys(spec, argv))
    }

    /// Exactly what `COMMAND GETKEYS` answers for `argv`: the keys, or its error.
    pub fn command_getkeys<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Keys, KeyError> {
        let spec = self.lookup_checked(argv)?;
        if !spec.has_key_arguments() {
            return Err(KeyError::NoKeyArguments);
        }
        if !spec.accepts_argc(argv.len()) {
            return Err(KeyError::WrongArity);
        }
        let keys = getkeys(spec, argv);
        if keys.is_empty() && !spec.flags.contains(CommandFlags::NO_MANDATORY_KEYS) {
            return Err(KeyError::InvalidArguments);
        }
        Ok(keys)
    }

    /// The keys a Redis 7.0 cluster node routes `argv` by: those of the command's own
    /// key-finding function for `movablekeys` commands, else those of its legacy key range
    /// (shard channels included).
    pub fn routing_keys<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Keys, KeyError> {
        let spec = self.checked(argv)?;
        Ok(Keys::routing(spec, argv))
    }

    /// The slot of `argv` as a Redis 7.0 cluster node finds it, from its
    /// [`routing_keys`](Self::routing_keys).
    pub fn slot<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<SlotAnswer, KeyError> {
        Ok(self.routing_keys(argv)?.slot(argv))
    }

    fn lookup_checked<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<&'static CommandSpec, KeyError> {
        self.lookup(argv).ok_or_else(|| {
            let known = argv.first().and_then(|name| self.command(name.as_ref()));
            match known {
                Some(_) => KeyError::UnknownSubcommand,
                None => KeyError::UnknownCommand,
            }
        })
    }

    pub(crate) fn checked<A: AsRef<[u8]>>(
        &self,
        argv: &[A],
    ) -> Result<&'static CommandSpec, KeyError> {
        let spec = self.lookup_checked(argv)?;
        if spec.accepts_argc(argv.len()) {
            Ok(spec)
        } else {
            Err(KeyError::WrongArity)
        }
    }
}

/// `getKeysFromCommandWithSpecs`: the specs when they are reliable and answer, else the
/// command's native function, else nothing.
fn getkeys<A: AsRef<[u8]>>(spec: &CommandSpec, argv: &[A]) -> Keys {
    let has_keyspec = spec
        .key_specs
        .iter()
        .any(|s| !s.flags.contains(KeySpecFlags::NOT_KEY));
    let variable = spec
        .key_specs
        .iter()
        .any(|s| s.flags.contains(KeySpecFlags::VARIABLE_FLAGS));
    if has_keyspec && !variable {
        let mut keys = Keys::default();
        if by_specs(spec, argv, &mut keys) == Ok(true) {
            return keys;
        }
    }
    native(spec, argv).unwrap_or_default()
}

/// The keys by the specs, into `keys`; `Ok(false)` when a spec is invalid for these
/// arguments or marked incomplete (`getKeysUsingKeySpecs` returning -1).
fn by_specs<A: AsRef<[u8]>>(
    spec: &CommandSpec,
    argv: &[A],
    keys: &mut Keys,
) -> Result<bool, KeyError> {
    let argc = argv.len() as i64;
    let arg = |at: i64| argv.get(usize::try_from(at).ok()?).map(AsRef::as_ref);
    for key_spec in spec.key_specs {
        if key_spec.flags.contains(KeySpecFlags::NOT_KEY) {
            continue;
        }
        let mut first = match key_spec.begin_search {
            BeginSearch::Index(at) => i64::from(at),
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => {
                let start_from = i64::from(start_from);
                // Forwards to the second-to-last argument, or backwards down to the third.
                let (start, end) = if start_from > 0 {
                    (start_from, argc - 1)
                } else {
                    (argc + start_from, 1)
                };
                let mut found = None;
                let mut i = start;
                while i != end && (1..argc).contains(&i) {
                    if arg(i).is_some_and(|a| a.eq_ignore_ascii_case(keyword.as_bytes())) {
                        found = Some(i + 1);
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                match found {
                    Some(first) => first,
                    None => continue, // an optional keyword that is absent
                }
            }
            BeginSearch::Unknown => return Ok(false),
        };
        let (last, step) = match key_spec.find_keys {
            FindKeys::Range {
                last_key,
                step,
                limit,
            } => {
                let last_key = i64::from(last_key);
                let last = if last_key >= 0 {
                    first + last_key
                } else if limit == 0 {
                    argc + last_key
                } else {
                    first + ((argc - first) / i64::from(limit) + last_key)
                };
                (last, i64::from(step))
            }
            FindKeys::Keynum {
                keynum_index,
                first_key,
                step,
            } => {
                let Some(count) = arg(first + i64::from(keynum_index)).and_then(parse_i64) else {
                    return Ok(false);
                };
                if count < 0 {
                    return Ok(false);
                }
                first += i64::from(first_key);
                // The server keeps the count in an `int`. `count` keys, `step` apart: Valkey
                // 9's MSETEX (key, value pairs) is the first with a step above 1, where
                // Redis's older `first + count - 1` would stop half-way.
                let step = i64::from(step);
                (first + (i64::from(count as i32) - 1) * step, step)
            }
            FindKeys::Unknown => return Ok(false),
        };
        if last >= argc || last < first || first >= argc || step < 1 {
            return Ok(false);
        }
        if !keys.push(first as usize, last as usize, step as usize, key_spec.flags) {
            return Err(KeyError::TooManySpecs);
        }
        if key_spec.flags.contains(KeySpecFlags::INCOMPLETE) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The legacy range (`getKeysUsingLegacyRangeSpec`): no key at all when a position falls
/// outside the arguments of a variadic command.
fn legacy<A: AsRef<[u8]>>(spec: &CommandSpec, argv: &[A]) -> Keys {
    let (first, last, step) = spec.legacy_keys;
    let argc = argv.len() as i64;
    let (first, mut last, step) = (i64::from(first), i64::from(last), i64::from(step));
    if first <= 0 || step < 1 {
        return Keys::default();
    }
    if last < 0 {
        last += argc;
    }
    if last < first {
        return Keys::default();
    }
    // The positions stepped through stop at `last`; past the arguments there is no key.
    let reached = first + (last - first) / step * step;
    if reached >= argc {
        return Keys::default();
    }
    let mut keys = Keys::default();
    keys.push(
        first as usize,
        reached as usize,
        step as usize,
        KeySpecFlags::EMPTY,
    );
    keys
}

/// The server's native key-finding function of a command (`getkeys_proc`), for the commands
/// that have one; `None` for the others.
fn native<A: AsRef<[u8]>>(spec: &CommandSpec, argv: &[A]) -> Option<Keys> {
    let name = spec.name;
    Some(match name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            numkeys(argv, None, 2, 3)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => numkeys(argv, Some(1), 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            numkeys(argv, None, 1, 2)
        }
        "blmpop" | "bzmpop" => numkeys(argv, None, 2, 3),
        "sort_ro" => Keys::one(1, KeySpecFlags::RO.or(KeySpecFlags::ACCESS)),
        "sort" => sort(argv),
        "migrate" => migrate(argv),
        "georadius" | "georadiusbymember" => georadius(argv),
        "xread" | "xreadgroup" => xread(argv),
        "set" | "bitfield" => Keys::one(1, KeySpecFlags::EMPTY),
        _ => return None,
    })
}

fn is<A: AsRef<[u8]>>(argv: &[A], at: usize, word: &str) -> bool {
    argv.get(at)
        .is_some_and(|a| a.as_ref().eq_ignore_ascii_case(word.as_bytes()))
}

/// `COMMAND [dest] numkeys key [key …] …`: the count read the way C's `atoi` reads it; no key
/// at all when it is below 1 or more than the arguments hold. The destination comes last.
fn numkeys<A: AsRef<[u8]>>(
    argv: &[A],
    store: Option<usize>,
    count_at: usize,
    first: usize,
) -> Keys {
    let mut keys = Keys::default();
    let count = argv.get(count_at).map_or(0, |a| atoi(a.as_ref()));
    let room = argv.len().saturating_sub(first) as i64;
    if count < 1 || i64::from(count) > room {
        return keys;
    }
    keys.push(first, first + count as usize - 1, 1, KeySpecFlags::EMPTY);
    if let Some(store) = store {
        keys.push(store, store, 1, KeySpecFlags::EMPTY);
    }
    keys
}

/// SORT: the sorted key, and the key after the last STORE, skipping the arguments of LIMIT
/// (two), GET and BY (one).
fn sort<A: AsRef<[u8]>>(argv: &[A]) -> Keys {
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        if is(argv, i, "limit") {
            i += 2;
        } else if is(argv, i, "store") && i + 1 < argv.len() {
            store = Some(i + 1);
        } else if is(argv, i, "get") || is(argv, i, "by") {
            i += 1;
        }
        i += 1;
    }
    let mut keys = Keys::one(1, KeySpecFlags::RO.or(KeySpecFlags::ACCESS));
    if let Some(at) = store {
        keys.push(at, at, 1, KeySpecFlags::OW.or(KeySpecFlags::UPDATE));
    }
    keys
}

/// MIGRATE: the key at 3, or with `KEYS` (searched from the seventh argument, skipping the
/// arguments of AUTH and AUTH2) every argument after it, when the key at 3 is empty.
fn migrate<A: AsRef<[u8]>>(argv: &[A]) -> Keys {
    let flags = KeySpecFlags::RW
        .or(KeySpecFlags::ACCESS)
        .or(KeySpecFlags::DELETE);
    let (mut first, mut count) = (3, 1);
    let mut i = 6;
    while i < argv.len() {
        if is(argv, i, "keys") {
            if argv.get(3).is_some_and(|k| !k.as_ref().is_empty()) {
                count = 0;
            } else {
                first = i + 1;
                count = argv.len() - first;
            }
            break;
        }
        if is(argv, i, "auth") {
            i += 1;
        } else if is(argv, i, "auth2") {
            i += 2;
        }
        i += 1;
    }
    let mut keys = Keys::default();
    if count > 0 {
        keys.push(first, first + count - 1, 1, flags);
    }
    keys
}

/// GEORADIUS / GEORADIUSBYMEMBER: the key, and the key after the last STORE or STOREDIST
/// from the sixth argument on.
fn georadius<A: AsRef<[u8]>>(argv: &[A]) -> Keys {
    let mut stored = None;
    let mut i = 5;
    while i < argv.len() {
        if (is(argv, i, "store") || is(argv, i, "storedist")) && i + 1 < argv.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    let mut keys = Keys::one(1, KeySpecFlags::EMPTY);
    if let Some(at) = stored {
        keys.push(at, at, 1, KeySpecFlags::EMPTY);
    }
    keys
}

/// XREAD / XREADGROUP: after the options (BLOCK, COUNT: one argument; GROUP: two; NOACK),
/// STREAMS, then as many keys as ids.
fn xread<A: AsRef<[u8]>>(argv: &[A]) -> Keys {
    let mut i = 1;
    let mut streams = None;
    while i < argv.len() {
        if is(argv, i, "block") || is(argv, i, "count") {
            i += 1;
        } else if is(argv, i, "group") {
            i += 2;
        } else if is(argv, i, "noack") {
        } else if is(argv, i, "streams") {
            streams = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    let mut keys = Keys::default();
    if let Some(at) = streams {
        let rest = argv.len() - at - 1;
        if rest > 0 && rest % 2 == 0 {
            keys.push(at + 1, at + rest / 2, 1, KeySpecFlags::EMPTY);
        }
    }
    keys
}

/// The server's `string2ll`: an optional minus, then digits without leading zeros, within
/// `i64`.
fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let valid = match digits {
        [] => false,
        [b'0'] => !negative,
        [first, ..] => (b'1'..=b'9').contains(first) && digits.iter().all(u8::is_ascii_digit),
    };
    if !valid {
        return None;
    }
    let mut value: i64 = 0;
    for digit in digits {
        let d = i64::from(digit - b'0');
        value = value.checked_mul(10).and_then(|v| {
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        })?;
    }
    Some(value)
}

/// C's `atoi` as glibc has it (`(int) strtol(s, NULL, 10)`): leading white space, a sign,
/// the digits up to the first other byte; an overflow saturates the `long` first.
fn atoi(text: &[u8]) -> i32 {
    let mut rest = text;
    while let Some((b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c, tail)) = rest.split_first() {
        rest = tail;
    }
    let negative = match rest.split_first() {
        Some((b'-', tail)) => {
            rest = tail;
            true
        }
        Some((b'+', tail)) => {
            rest = tail;
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    for &b in rest.iter().take_while(|b| b.is_ascii_digit()) {
        let d = i64::from(b - b'0');
        value = match value.checked_mul(10).and_then(|v| {
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        }) {
            Some(v) => v,
            None if negative => i64::MIN,
            None => i64::MAX,
        };
        if value == i64::MIN || value == i64::MAX {
            break;
        }
    }
    value as i32
}
