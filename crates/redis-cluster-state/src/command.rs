//! `CLUSTER <subcommand>` for the subcommands that need no bus traffic: the replies and the
//! errors of the real server, as RESP frames.

use alloc::{format, string::String, vec::Vec};

use redis_cluster_bus::{NodeFlags, NodeId};
use redis_hash_slot::{Slot, key_slot};
use redis_resp::Frame;

use crate::{
    cluster::ClusterNode,
    error::CommandError,
    output::Output,
    reply::{Protocol, Reply, text_reply},
    subcommand::{ClusterCommand, SetSlot},
    time::{Duration, Instant},
};

/// How long CLUSTER FORGET keeps a node out (ms).
const FORGET_TTL: Duration = Duration::from_secs(60);

fn error(text: impl Into<String>) -> Reply {
    Frame::SimpleError(format!("ERR {}", text.into()).into_bytes())
}

fn ok() -> Reply {
    Frame::SimpleString(b"OK".to_vec())
}

fn node_id(arg: &[u8]) -> Option<NodeId> {
    arg.try_into().ok().map(NodeId)
}

impl ClusterNode {
    /// Runs `CLUSTER <args…>` (`args` without `CLUSTER`) for the subcommands served from the
    /// tables alone: INFO, MYID, MYSHARDID, KEYSLOT, NODES, SLOTS, SHARDS, REPLICAS / SLAVES,
    /// COUNT-FAILURE-REPORTS, ADDSLOTS, ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE, SETSLOT,
    /// SET-CONFIG-EPOCH, BUMPEPOCH, FAILOVER, MEET, REPLICATE, FORGET, SAVECONFIG, FLUSHSLOTS,
    /// RESET, at time `now`. `keys_in_slot` counts the driver's keys in a slot
    /// (SETSLOT NODE refuses to give away a slot that still holds some). Returns `None` for
    /// any other subcommand, which the caller handles (or answers as unknown): LINKS needs
    /// the driver's figures for each connection, see [`ClusterNode::cluster_links`].
    pub fn cluster_command<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        protocol: Protocol,
        now: Instant,
        keys_in_slot: impl Fn(Slot) -> u64,
    ) -> Option<Reply> {
        let args: Vec<&[u8]> = args.iter().map(AsRef::as_ref).collect();
        let result = match ClusterCommand::parse(&args)? {
            Ok(command) => {
                let saves = command.saves_config();
                let reply = self.run_command(command, protocol, now, keys_in_slot);
                if saves && matches!(reply, Ok(Frame::SimpleString(_) | Frame::BulkString(_))) {
                    self.push(Output::SaveConfig);
                }
                reply
            }
            Err(e) => Err(e),
        };
        Some(result.unwrap_or_else(|e| error(format!("{e}"))))
    }

    /// Runs a parsed `CLUSTER` subcommand (see [`ClusterNode::cluster_command`]).
    pub fn run_command(
        &mut self,
        command: ClusterCommand<'_>,
        protocol: Protocol,
        now: Instant,
        keys_in_slot: impl Fn(Slot) -> u64,
    ) -> Result<Reply, CommandError> {
        let unknown =
            |id: &[u8]| CommandError::UnknownNode(String::from_utf8_lossy(id).into_owned());
        match command {
            ClusterCommand::Info => Ok(text_reply(protocol, self.cluster_info())),
            ClusterCommand::MyId => Ok(Frame::BulkString(self.myself().id.as_bytes().to_vec())),
            ClusterCommand::MyShardId => Ok(Frame::BulkString(self.shard_id().into_bytes())),
            ClusterCommand::KeySlot(key) => Ok(Frame::Integer(i64::from(u16::from(key_slot(key))))),
            ClusterCommand::Nodes => Ok(text_reply(protocol, self.cluster_nodes())),
            ClusterCommand::Slots => Ok(self.cluster_slots(protocol)),
            ClusterCommand::Shards => Ok(self.cluster_shards(protocol)),
            ClusterCommand::Replicas(id) => self.replicas_reply(id),
            ClusterCommand::CountFailureReports(id) => {
                match node_id(id).and_then(|id| self.node(&id)) {
                    Some(node) => {
                        let id = node.id;
                        Ok(Frame::Integer(self.failure_reports(&id, now) as i64))
                    }
                    None => Err(unknown(id)),
                }
            }
            ClusterCommand::AddSlots(slots) => self.add_slots(slots, now).map(|()| ok()),
            ClusterCommand::DelSlots(slots) => self.del_slots(slots, now).map(|()| ok()),
            ClusterCommand::SetSlot(parsed) => self.setslot_command(parsed, &keys_in_slot, now),
            ClusterCommand::SetConfigEpoch(epoch) => {
                self.set_config_epoch(epoch, now).map(|()| ok())
            }
            ClusterCommand::Failover(mode) => self.failover(mode, now).map(|()| ok()),
            ClusterCommand::Meet { given, address } => {
                let Some((ip, port, cport)) = address else {
                    return Err(CommandError::BadAddress(given));
                };
                self.meet(&ip, port, cport, now).map(|()| ok())
            }
            ClusterCommand::Replicate(id) => match node_id(id) {
                Some(id) => self.replicate(&id, now).map(|()| ok()),
                None => Err(unknown(id)),
            },
            ClusterCommand::Forget(id) => self.forget_command(id, now.as_millis()),
            ClusterCommand::Reset(hard) => {
                let keys: u64 = (0..16384).filter_map(Slot::new).map(&keys_in_slot).sum();
                if self.myself().is_master() && keys > 0 {
                    return Err(CommandError::ResetWithKeys);
                }
                self.reset(hard, now);
                Ok(ok())
            }
            ClusterCommand::SaveConfig => {
                self.push(Output::SaveConfig);
                Ok(ok())
            }
            ClusterCommand::FlushSlots => {
                let keys: u64 = (0..16384).filter_map(Slot::new).map(&keys_in_slot).sum();
                if keys > 0 {
                    return Err(CommandError::FlushWithKeys);
                }
                let mine: Vec<Slot> = self.myself().slots.iter().collect();
                for slot in mine {
                    self.bind(slot, None);
                }
                self.refresh_state();
                self.push(Output::SaveConfig);
                Ok(ok())
            }
            ClusterCommand::BumpEpoch => {
                let (bumped, epoch) = self.bump_epoch(now);
                let word = if bumped { "BUMPED" } else { "STILL" };
                Ok(Frame::SimpleString(format!("{word} {epoch}").into_bytes()))
            }
        }
    }

    /// `CLUSTER FORGET <id>`: removes the node and keeps it out for 60 s.
    fn forget_command(&mut self, id: &[u8], now: u64) -> Result<Reply, CommandError> {
        let unknown = || CommandError::UnknownNode(String::from_utf8_lossy(id).into_owned());
        let id = node_id(id)
            .filter(|id| self.node(id).is_some())
            .ok_or_else(unknown)?;
        let me = self.myself();
        if id == me.id {
            return Err(CommandError::ForgetMyself);
        }
        if me.is_replica() && me.master == Some(id) {
            return Err(CommandError::ForgetMyMaster);
        }
        let now = Instant::from_millis(now);
        self.topology.blacklist(id, now + FORGET_TTL, now);
        self.remove_node(&id);
        self.refresh_state();
        self.push(Output::SaveConfig);
        Ok(ok())
    }

    /// `CLUSTER RESET [SOFT|HARD]` (`clusterReset`): a replica becomes a master (the driver
    /// empties its keyspace on [`crate::Event::BecameMaster`]), every slot and open slot is
    /// dropped, every other node forgotten; HARD also zeroes the epochs and draws a new id.
    pub fn reset(&mut self, hard: bool, now: Instant) {
        self.tick(now);
        if self.myself().is_replica() {
            let me = self.topology.myself_mut();
            me.set(NodeFlags::REPLICA, false);
            me.set(NodeFlags::MASTER, true);
            me.master = None;
            self.push(Output::Event(crate::Event::BecameMaster));
        }
        self.topology.close_open_slots();
        for n in 0..16384 {
            if let Some(slot) = Slot::new(n) {
                self.bind(slot, None);
            }
        }
        let me = self.myself().id;
        let others: Vec<NodeId> = self.nodes().map(|n| n.id).filter(|id| *id != me).collect();
        for id in others {
            self.remove_node(&id);
        }
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.topology.myself_mut().config_epoch = 0;
            let id = crate::cluster::random_id(&mut self.rng);
            self.topology.rename(&me, id);
        }
        self.refresh_state();
        self.push(Output::SaveConfig);
    }

    /// The shard id: the one a newer server keeps in nodes.conf (`shard-id=`), else the id of
    /// the shard's master.
    pub fn shard_id(&self) -> String {
        let me = self.myself();
        if let Some(id) = me.aux_field("shard-id") {
            return String::from(id);
        }
        let master = me.master.filter(|_| me.is_replica()).unwrap_or(me.id);
        format!("{master}")
    }

    fn replicas_reply(&self, id: &[u8]) -> Result<Reply, CommandError> {
        let unknown = || CommandError::UnknownNode(String::from_utf8_lossy(id).into_owned());
        let master = node_id(id)
            .and_then(|id| self.node(&id))
            .ok_or_else(unknown)?;
        if !master.is_master() {
            return Err(CommandError::NotAMaster);
        }
        let lines = self.replica_lines(&master.id);
        Ok(Frame::Array(
            lines
                .into_iter()
                .map(|l| Frame::BulkString(l.into_bytes()))
                .collect(),
        ))
    }

    fn setslot_command(
        &mut self,
        parsed: Result<SetSlot<'_>, CommandError>,
        keys_in_slot: &impl Fn(Slot) -> u64,
        now: Instant,
    ) -> Result<Reply, CommandError> {
        if self.myself().is_replica() {
            return Err(CommandError::SetSlotOnReplica);
        }
        // A node the table does not hold: "Unknown node" for NODE, the server's other text
        // for MIGRATING and IMPORTING.
        let known = |node: &Self, id: &[u8], error: fn(String) -> CommandError| {
            node_id(id)
                .filter(|id| node.node(id).is_some())
                .ok_or_else(|| error(String::from_utf8_lossy(id).into_owned()))
        };
        match parsed? {
            SetSlot::Stable(slot) => {
                self.topology.set_migrating(slot, None);
                self.topology.set_importing(slot, None);
            }
            SetSlot::Migrating(slot, id) => {
                let id = known(self, id, CommandError::UnknownAbout)?;
                self.set_migrating(slot, id, now)?;
            }
            SetSlot::Importing(slot, id) => {
                let id = known(self, id, CommandError::UnknownAbout)?;
                self.set_importing(slot, id, now)?;
            }
            SetSlot::Node(slot, id) => {
                let id = known(self, id, CommandError::UnknownNode)?;
                self.set_slot_node(slot, id, keys_in_slot(slot), now)?;
            }
        }
        Ok(ok())
    }

    /// `CLUSTER SETSLOT <slot> MIGRATING <id>` on the owner.
    pub fn set_migrating(
        &mut self,
        slot: Slot,
        to: NodeId,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.tick(now);
        if self.owner(slot).map(|n| n.id) != Some(self.myself().id) {
            return Err(CommandError::NotOwner(slot));
        }
        if !self.node(&to).is_some_and(|n| n.is_master()) {
            return Err(CommandError::TargetNotMaster);
        }
        self.topology.set_migrating(slot, Some(to));
        Ok(())
    }

    /// `CLUSTER SETSLOT <slot> IMPORTING <id>` on the new owner.
    pub fn set_importing(
        &mut self,
        slot: Slot,
        from: NodeId,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.tick(now);
        if self.owner(slot).map(|n| n.id) == Some(self.myself().id) {
            return Err(CommandError::AlreadyOwner(slot));
        }
        if !self.node(&from).is_some_and(|n| n.is_master()) {
            return Err(CommandError::TargetNotMaster);
        }
        self.topology.set_importing(slot, Some(from));
        Ok(())
    }

    /// `CLUSTER SETSLOT <slot> NODE <id>`: `keys` is how many keys this node holds in the
    /// slot. Closing an import on the new owner bumps its config epoch without consensus; a
    /// master that gives away its last slot becomes the receiver's replica when replica
    /// migration is allowed.
    pub fn set_slot_node(
        &mut self,
        slot: Slot,
        to: NodeId,
        keys: u64,
        now: Instant,
    ) -> Result<(), CommandError> {
        self.tick(now);
        let me = self.myself().id;
        let Some(target) = self.node(&to) else {
            return Err(CommandError::UnknownNode(format!("{to}")));
        };
        if !target.is_master() {
            return Err(CommandError::TargetNotMaster);
        }
        let mine = self.owner(slot).map(|n| n.id) == Some(me);
        if mine && to != me && keys > 0 {
            return Err(CommandError::StillHoldsKeys(slot));
        }
        if keys == 0 {
            self.topology.set_migrating(slot, None);
        }
        let at = self.topology.index_of(&to);
        self.bind(slot, at);
        if mine && to != me && !self.myself().has_slots() && self.config.allow_replica_migration {
            let node = self.topology.myself_mut();
            node.set(NodeFlags::MASTER, false);
            node.set(NodeFlags::REPLICA, true);
            node.master = Some(to);
            self.topology.close_open_slots();
        }
        if to == me && self.topology.set_importing(slot, None).is_some() {
            // Bump without consensus, so that the new claim wins over the old owner's.
            self.bump_epoch(now);
        }
        self.refresh_state();
        Ok(())
    }
}
