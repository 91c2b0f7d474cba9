//! [`ClusterCommand`]: a `CLUSTER` subcommand this crate serves, parsed from its arguments
//! before it runs. Parsing answers what the server answers before it looks at its tables
//! (an unknown option, a slot out of range, the wrong number of arguments); running it, what
//! the tables say.

use alloc::{string::String, vec::Vec};

use redis_hash_slot::Slot;

use crate::{cluster::CommandError, election::FailoverMode};

/// A `CLUSTER` subcommand, its arguments parsed. Node ids stay as given: an id that is not
/// one is answered as an unknown node, with the text as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterCommand<'a> {
    /// `INFO`.
    Info,
    /// `MYID`.
    MyId,
    /// `MYSHARDID`.
    MyShardId,
    /// `KEYSLOT key`.
    KeySlot(&'a [u8]),
    /// `NODES`.
    Nodes,
    /// `SLOTS`.
    Slots,
    /// `SHARDS`.
    Shards,
    /// `REPLICAS id` / `SLAVES id`.
    Replicas(&'a [u8]),
    /// `COUNT-FAILURE-REPORTS id`.
    CountFailureReports(&'a [u8]),
    /// `ADDSLOTS slot…` and `ADDSLOTSRANGE start end…`, the ranges spelled out.
    AddSlots(Vec<Slot>),
    /// `DELSLOTS slot…` and `DELSLOTSRANGE start end…`.
    DelSlots(Vec<Slot>),
    /// `SETSLOT slot action [id]`. The server checks that it runs on a master before it
    /// reads the arguments, so their errors wait in the `Err` until then.
    SetSlot(Result<SetSlot<'a>, CommandError>),
    /// `SET-CONFIG-EPOCH epoch`.
    SetConfigEpoch(u64),
    /// `BUMPEPOCH`.
    BumpEpoch,
    /// `FAILOVER [FORCE|TAKEOVER]`.
    Failover(FailoverMode),
    /// `MEET ip port [cport]`: the address as written back in errors, then the parsed one.
    Meet {
        /// `ip:port` as given, for the error of an address that cannot be one.
        given: String,
        /// The address, when it parses.
        address: Option<(String, u16, u16)>,
    },
    /// `REPLICATE id`.
    Replicate(&'a [u8]),
    /// `FORGET id`.
    Forget(&'a [u8]),
    /// `SAVECONFIG`.
    SaveConfig,
    /// `FLUSHSLOTS`.
    FlushSlots,
    /// `RESET [SOFT|HARD]`: whether HARD.
    Reset(bool),
}

/// `SETSLOT`'s action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlot<'a> {
    /// `STABLE`.
    Stable(Slot),
    /// `MIGRATING id`.
    Migrating(Slot, &'a [u8]),
    /// `IMPORTING id`.
    Importing(Slot, &'a [u8]),
    /// `NODE id`.
    Node(Slot, &'a [u8]),
}

impl<'a> ClusterCommand<'a> {
    /// Parses `args` (without `CLUSTER`): `None` for a subcommand this crate does not serve
    /// (LINKS, HELP, …, or an unknown one), else the command or the error the server answers
    /// before it runs one.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterCommand, FailoverMode};
    ///
    /// let parsed = ClusterCommand::parse(&[&b"failover"[..], b"FORCE"]);
    /// assert_eq!(parsed, Some(Ok(ClusterCommand::Failover(FailoverMode::Force))));
    /// let wrong = ClusterCommand::parse(&[&b"addslots"[..]]).and_then(Result::err);
    /// assert_eq!(
    ///     wrong.map(|e| e.to_string()).as_deref(),
    ///     Some("wrong number of arguments for 'cluster|addslots' command")
    /// );
    /// assert_eq!(ClusterCommand::parse(&[&b"links"[..]]), None);
    /// ```
    pub fn parse(args: &[&'a [u8]]) -> Option<Result<Self, CommandError>> {
        let (name, rest) = args.split_first()?;
        let name = name.to_ascii_lowercase();
        let command = match (name.as_slice(), rest) {
            (b"info", []) => Ok(Self::Info),
            (b"myid", []) => Ok(Self::MyId),
            (b"myshardid", []) => Ok(Self::MyShardId),
            (b"keyslot", [key]) => Ok(Self::KeySlot(key)),
            (b"nodes", []) => Ok(Self::Nodes),
            (b"slots", []) => Ok(Self::Slots),
            (b"shards", []) => Ok(Self::Shards),
            (b"replicas" | b"slaves", [id]) => Ok(Self::Replicas(id)),
            (b"count-failure-reports", [id]) => Ok(Self::CountFailureReports(id)),
            (b"addslots", slots) if !slots.is_empty() => slot_list(slots).map(Self::AddSlots),
            (b"delslots", slots) if !slots.is_empty() => slot_list(slots).map(Self::DelSlots),
            (b"addslotsrange", pairs) if !pairs.is_empty() && pairs.len() % 2 == 0 => {
                slot_ranges(pairs).map(Self::AddSlots)
            }
            (b"delslotsrange", pairs) if !pairs.is_empty() && pairs.len() % 2 == 0 => {
                slot_ranges(pairs).map(Self::DelSlots)
            }
            (b"setslot", [slot, action, target @ ..]) => {
                Ok(Self::SetSlot(set_slot(slot, action, target)))
            }
            (b"set-config-epoch", [epoch]) => match core::str::from_utf8(epoch)
                .ok()
                .and_then(|e| e.parse::<i64>().ok())
            {
                Some(n) => u64::try_from(n).map(Self::SetConfigEpoch).map_err(|_| {
                    CommandError::BadConfigEpoch(String::from_utf8_lossy(epoch).into_owned())
                }),
                None => Err(CommandError::NotInteger),
            },
            (b"bumpepoch", []) => Ok(Self::BumpEpoch),
            (b"failover", options) if options.len() <= 1 => {
                match options.first().map(|o| o.to_ascii_lowercase()).as_deref() {
                    None => Ok(Self::Failover(FailoverMode::Default)),
                    Some(b"force") => Ok(Self::Failover(FailoverMode::Force)),
                    Some(b"takeover") => Ok(Self::Failover(FailoverMode::Takeover)),
                    Some(_) => Err(CommandError::Syntax),
                }
            }
            (b"meet", [ip, port, cport @ ..]) if cport.len() <= 1 => {
                Ok(meet(ip, port, cport.first().copied()))
            }
            (b"replicate", [id]) => Ok(Self::Replicate(id)),
            (b"forget", [id]) => Ok(Self::Forget(id)),
            (b"saveconfig", []) => Ok(Self::SaveConfig),
            (b"flushslots", []) => Ok(Self::FlushSlots),
            (b"reset", options) if options.len() <= 1 => {
                match options.first().map(|o| o.to_ascii_lowercase()).as_deref() {
                    None | Some(b"soft") => Ok(Self::Reset(false)),
                    Some(b"hard") => Ok(Self::Reset(true)),
                    Some(_) => Err(CommandError::Syntax),
                }
            }
            (known, _) if SERVED.contains(&known) => Err(CommandError::Arity(
                String::from_utf8_lossy(known).into_owned(),
            )),
            _ => return None,
        };
        Some(command)
    }

    /// Whether the server saves nodes.conf before it replies to this command when it
    /// succeeds (`CLUSTER_TODO_SAVE_CONFIG`, saved in `clusterBeforeSleep`, which runs before
    /// replies are written).
    pub fn saves_config(&self) -> bool {
        matches!(
            self,
            Self::AddSlots(_)
                | Self::DelSlots(_)
                | Self::SetSlot(_)
                | Self::SetConfigEpoch(_)
                | Self::BumpEpoch
                | Self::Replicate(_)
                | Self::Forget(_)
                | Self::FlushSlots
                | Self::Reset(_)
        )
    }
}

/// The subcommands [`ClusterCommand::parse`] knows, for its arity error.
const SERVED: [&[u8]; 24] = [
    b"info",
    b"myid",
    b"myshardid",
    b"keyslot",
    b"nodes",
    b"slots",
    b"shards",
    b"replicas",
    b"slaves",
    b"count-failure-reports",
    b"addslots",
    b"delslots",
    b"addslotsrange",
    b"delslotsrange",
    b"setslot",
    b"set-config-epoch",
    b"bumpepoch",
    b"failover",
    b"meet",
    b"replicate",
    b"forget",
    b"saveconfig",
    b"flushslots",
    b"reset",
];

/// `getSlotOrReply`: a decimal in 0..16384.
pub(crate) fn slot(arg: &[u8]) -> Result<Slot, CommandError> {
    core::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|n| u16::try_from(n).ok())
        .and_then(Slot::new)
        .ok_or(CommandError::BadSlot)
}

fn slot_list(args: &[&[u8]]) -> Result<Vec<Slot>, CommandError> {
    args.iter().map(|s| slot(s)).collect()
}

fn slot_ranges(pairs: &[&[u8]]) -> Result<Vec<Slot>, CommandError> {
    let mut slots = Vec::new();
    for pair in pairs.chunks(2) {
        let (start, end) = (slot(pair[0])?, slot(pair[1])?);
        if start > end {
            return Err(CommandError::RangeOrder(u16::from(start), u16::from(end)));
        }
        slots.extend((u16::from(start)..=u16::from(end)).filter_map(Slot::new));
    }
    Ok(slots)
}

fn set_slot<'a>(
    slot_arg: &[u8],
    action: &[u8],
    target: &[&'a [u8]],
) -> Result<SetSlot<'a>, CommandError> {
    let slot = slot(slot_arg)?;
    match (action.to_ascii_lowercase().as_slice(), target) {
        (b"stable", []) => Ok(SetSlot::Stable(slot)),
        (b"migrating", [id]) => Ok(SetSlot::Migrating(slot, id)),
        (b"importing", [id]) => Ok(SetSlot::Importing(slot, id)),
        (b"node", [id]) => Ok(SetSlot::Node(slot, id)),
        _ => Err(CommandError::BadSetSlot),
    }
}

fn meet<'a>(ip: &[u8], port: &[u8], cport: Option<&[u8]>) -> ClusterCommand<'a> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let given = alloc::format!("{}:{}", text(ip), text(port));
    let address: Option<core::net::IpAddr> =
        core::str::from_utf8(ip).ok().and_then(|s| s.parse().ok());
    let number = |b: &[u8]| {
        core::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
    };
    let address = match (address, number(port)) {
        (Some(address), Some(port)) => {
            let cport = match cport {
                Some(c) => number(c),
                None => Some(port.wrapping_add(10000)),
            };
            cport.map(|cport| (alloc::format!("{address}"), port, cport))
        }
        _ => None,
    };
    ClusterCommand::Meet { given, address }
}
