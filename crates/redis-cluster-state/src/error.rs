//! [`CommandError`]: why a command on the node table was refused, with the server's text.

use alloc::string::String;

use redis_hash_slot::Slot;

/// Why a command on the node table was refused; the text is the server's, without `ERR `.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// ADDSLOTS of a slot that has an owner.
    #[error("Slot {0} is already busy")]
    SlotBusy(Slot),
    /// DELSLOTS of a slot without one.
    #[error("Slot {0} is already unassigned")]
    SlotUnassigned(Slot),
    /// The same slot twice in one ADDSLOTS / DELSLOTS.
    #[error("Slot {0} specified multiple times")]
    SlotTwice(Slot),
    /// A slot number out of range, or not a number.
    #[error("Invalid or out of range slot")]
    BadSlot,
    /// An id the table does not hold.
    #[error("Unknown node {0}")]
    UnknownNode(String),
    /// CLUSTER MEET of an address that cannot be one.
    #[error("Invalid node address specified: {0}")]
    BadAddress(String),
    /// An id the table does not hold (SETSLOT MIGRATING / IMPORTING).
    #[error("I don't know about node {0}")]
    UnknownAbout(String),
    /// SETSLOT MIGRATING of a slot this node does not own.
    #[error("I'm not the owner of hash slot {0}")]
    NotOwner(Slot),
    /// SETSLOT IMPORTING of a slot this node owns.
    #[error("I'm already the owner of hash slot {0}")]
    AlreadyOwner(Slot),
    /// SETSLOT NODE giving away a slot that still holds keys.
    #[error(
        "Can't assign hashslot {0} to a different node while I still hold keys for this hash slot."
    )]
    StillHoldsKeys(Slot),
    /// ADDSLOTSRANGE / DELSLOTSRANGE with a start after its end.
    #[error("start slot number {0} is greater than end slot number {1}")]
    RangeOrder(Slot, Slot),
    /// A number argument that is not one (SET-CONFIG-EPOCH).
    #[error("value is not an integer or out of range")]
    NotInteger,
    /// CLUSTER RESET of a master that holds keys.
    #[error("CLUSTER RESET can't be called with master nodes containing keys")]
    ResetWithKeys,
    /// CLUSTER FLUSHSLOTS while keys are held.
    #[error("DB must be empty to perform CLUSTER FLUSHSLOTS.")]
    FlushWithKeys,
    /// CLUSTER FORGET of this node.
    #[error("I tried hard but I can't forget myself...")]
    ForgetMyself,
    /// CLUSTER FORGET of this replica's master.
    #[error("Can't forget my master!")]
    ForgetMyMaster,
    /// CLUSTER REPLICAS of a node that is not a master.
    #[error("The specified node is not a master")]
    NotAMaster,
    /// CLUSTER SETSLOT on a replica.
    #[error("Please use SETSLOT only with masters.")]
    SetSlotOnReplica,
    /// CLUSTER SETSLOT with an unknown action or the wrong arguments.
    #[error("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")]
    BadSetSlot,
    /// SETSLOT MIGRATING / IMPORTING / NODE naming a node that is not a master.
    #[error("Target node is not a master")]
    TargetNotMaster,
    /// SET-CONFIG-EPOCH on a node that knows others.
    #[error("The user can assign a config epoch only when the node does not know any other node.")]
    NotAlone,
    /// SET-CONFIG-EPOCH on a node whose config epoch is set.
    #[error("Node config epoch is already non-zero")]
    EpochAlreadySet,
    /// REPLICATE of this node.
    #[error("Can't replicate myself")]
    ReplicateMyself,
    /// REPLICATE of a replica.
    #[error("I can only replicate a master, not a replica.")]
    ReplicateReplica,
    /// REPLICATE on a master that owns slots.
    #[error("To set a master the node must be empty and without assigned slots.")]
    ReplicateWithSlots,
    /// CLUSTER FAILOVER on a master.
    #[error("You should send CLUSTER FAILOVER to a replica")]
    FailoverOnMaster,
    /// CLUSTER FAILOVER on a replica that does not know its master.
    #[error("I'm a replica but my master is unknown to me")]
    MasterUnknown,
    /// CLUSTER FAILOVER (no option) while the master is down.
    #[error("Master is down or failed, please use CLUSTER FAILOVER FORCE")]
    MasterDown,
    /// A subcommand with the wrong number of arguments (its name, lowercase).
    #[error("wrong number of arguments for 'cluster|{0}' command")]
    Arity(String),
    /// An option the subcommand does not have.
    #[error("syntax error")]
    Syntax,
    /// SET-CONFIG-EPOCH with a negative epoch (the argument as given).
    #[error("Invalid config epoch specified: {0}")]
    BadConfigEpoch(String),
}
