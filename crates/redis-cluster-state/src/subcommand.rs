//! [`ClusterCommand`]: a `CLUSTER` subcommand this crate serves, parsed from its arguments
//! before it runs. Parsing answers what the server answers before it looks at its tables
//! (an unknown option, a slot out of range, the wrong number of arguments); running it, what
//! the tables say.

use alloc::{string::String, vec::Vec};

use redis_hash_slot::Slot;

use crate::{election::FailoverMode, error::CommandError};

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
        // Each arm checks its own arity: `None` from an arm is the arity error.
        let none = |command: Self| rest.is_empty().then_some(Ok(command));
        let one = |command: fn(&'a [u8]) -> Self| match rest {
            [arg] => Some(Ok(command(arg))),
            _ => None,
        };
        let pairs = !rest.is_empty() && rest.len() % 2 == 0;
        let command = match name.as_slice() {
            b"info" => none(Self::Info),
            b"myid" => none(Self::MyId),
            b"myshardid" => none(Self::MyShardId),
            b"keyslot" => one(Self::KeySlot),
            b"nodes" => none(Self::Nodes),
            b"slots" => none(Self::Slots),
            b"shards" => none(Self::Shards),
            b"replicas" | b"slaves" => one(Self::Replicas),
            b"count-failure-reports" => one(Self::CountFailureReports),
            b"addslots" => (!rest.is_empty()).then(|| slot_list(rest).map(Self::AddSlots)),
            b"delslots" => (!rest.is_empty()).then(|| slot_list(rest).map(Self::DelSlots)),
            b"addslotsrange" => pairs.then(|| slot_ranges(rest).map(Self::AddSlots)),
            b"delslotsrange" => pairs.then(|| slot_ranges(rest).map(Self::DelSlots)),
            b"setslot" => match rest {
                [slot, action, target @ ..] => {
                    Some(Ok(Self::SetSlot(set_slot(slot, action, target))))
                }
                _ => None,
            },
            b"set-config-epoch" => match rest {
                [epoch] => Some(config_epoch(epoch)),
                _ => None,
            },
            b"bumpepoch" => none(Self::BumpEpoch),
            b"failover" => match rest.first().map(|o| o.to_ascii_lowercase()).as_deref() {
                _ if rest.len() > 1 => None,
                None => Some(Ok(Self::Failover(FailoverMode::Default))),
                Some(b"force") => Some(Ok(Self::Failover(FailoverMode::Force))),
                Some(b"takeover") => Some(Ok(Self::Failover(FailoverMode::Takeover))),
                Some(_) => Some(Err(CommandError::Syntax)),
            },
            b"meet" => match rest {
                [ip, port] => Some(Ok(meet(ip, port, None))),
                [ip, port, cport] => Some(Ok(meet(ip, port, Some(cport)))),
                _ => None,
            },
            b"replicate" => one(Self::Replicate),
            b"forget" => one(Self::Forget),
            b"saveconfig" => none(Self::SaveConfig),
            b"flushslots" => none(Self::FlushSlots),
            b"reset" => match rest.first().map(|o| o.to_ascii_lowercase()).as_deref() {
                _ if rest.len() > 1 => None,
                None | Some(b"soft") => Some(Ok(Self::Reset(false))),
                Some(b"hard") => Some(Ok(Self::Reset(true))),
                Some(_) => Some(Err(CommandError::Syntax)),
            },
            _ => return None,
        };
        Some(command.unwrap_or_else(|| {
            Err(CommandError::Arity(
                String::from_utf8_lossy(&name).into_owned(),
            ))
        }))
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

/// `SET-CONFIG-EPOCH`'s argument: an integer, not negative.
fn config_epoch<'a>(epoch: &[u8]) -> Result<ClusterCommand<'a>, CommandError> {
    let n = core::str::from_utf8(epoch)
        .ok()
        .and_then(|e| e.parse::<i64>().ok())
        .ok_or(CommandError::NotInteger)?;
    u64::try_from(n)
        .map(ClusterCommand::SetConfigEpoch)
        .map_err(|_| CommandError::BadConfigEpoch(String::from_utf8_lossy(epoch).into_owned()))
}

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
            return Err(CommandError::RangeOrder(start, end));
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
