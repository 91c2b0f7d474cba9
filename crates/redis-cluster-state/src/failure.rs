//! Failure detection (semantics section 3): failure reports from masters, FAIL on a majority
//! of the slot-owning masters and its broadcast, FAIL messages, and when FAIL is cleared.

use redis_cluster_bus::{MessageType, NodeFlags, NodeId, OwnedFail};

use crate::{
    cluster::ClusterNode,
    node::Node,
    output::{Event, Output},
    time::Instant,
};

impl ClusterNode {
    /// How many slot-owning masters make a majority: `size / 2 + 1`.
    pub(crate) fn quorum(&self) -> usize {
        let size = self
            .nodes()
            .filter(|n| n.is_master() && n.has_slots())
            .count();
        size / 2 + 1
    }

    /// The failure reports about `id` younger than twice the node timeout.
    pub fn failure_reports(&self, id: &NodeId, now: Instant) -> usize {
        let now = now.as_millis();
        let validity = self.config.node_timeout.as_millis() * 2;
        self.node(id).map_or(0, |n| {
            n.fail_reports
                .iter()
                .filter(|(_, at)| now.saturating_sub(*at) <= validity)
                .count()
        })
    }

    /// A gossip entry from master `sender` about the node at `about` in the table: a PFAIL or FAIL flag records (or
    /// refreshes) its report, a healthy entry withdraws it; then FAIL is evaluated.
    pub(crate) fn gossip_failure_report(
        &mut self,
        sender: &NodeId,
        about: u16,
        flags: NodeFlags,
        now: u64,
    ) {
        if about == self.topology.me() {
            return;
        }
        let failing = flags.contains(NodeFlags::PFAIL) || flags.contains(NodeFlags::FAIL);
        // Most entries are healthy ones about nodes nobody reported: nothing to write. The
        // cron reads no reports, so a write makes no new table version (a FAIL mark does).
        let idle = self
            .topology
            .at(about)
            .is_none_or(|node| !failing && !node.reported);
        if idle {
            return;
        }
        let Some(node) = self.topology.at_mut_quiet(about) else {
            return;
        };
        if node.reported {
            node.fail_reports.retain(|(reporter, _)| reporter != sender);
        }
        if failing {
            node.fail_reports.push((*sender, now));
        }
        node.reported = !node.fail_reports.is_empty();
        if failing {
            let id = node.id;
            self.mark_failing_if_needed(&id, now);
        }
    }

    /// `markNodeAsFailingIfNeeded`: a node this node sees as PFAIL becomes FAIL when the
    /// valid reports (plus this node's own opinion, for a master) reach the quorum; the FAIL
    /// is then broadcast.
    fn mark_failing_if_needed(&mut self, id: &NodeId, now: u64) {
        let Some(node) = self.node(id) else { return };
        if !node.is_pfailed() || node.is_failed() {
            return;
        }
        let votes = self.failure_reports(id, Instant::from_millis(now))
            + usize::from(self.myself().is_master());
        if votes < self.quorum() {
            return;
        }
        if let Some(node) = self.topology.node_mut(id) {
            node.set(NodeFlags::PFAIL, false);
            node.set(NodeFlags::FAIL, true);
            node.fail_time = now;
        }
        self.push(Output::Event(Event::NodeFailed { node: *id }));
        self.broadcast(MessageType::FAIL, OwnedFail { node: *id }.into());
        self.refresh_state();
        self.push(Output::SaveConfig);
    }

    /// A FAIL message from a known node about `id`: believed without a quorum check, unless
    /// it is about this node or a node already FAIL.
    pub(crate) fn handle_fail(&mut self, id: &NodeId, now: u64) {
        if *id == self.myself().id {
            return;
        }
        let Some(node) = self.topology.node_mut(id) else {
            return;
        };
        if node.is_failed() {
            return;
        }
        node.set(NodeFlags::PFAIL, false);
        node.set(NodeFlags::FAIL, true);
        node.fail_time = now;
        self.push(Output::Event(Event::NodeFailed { node: *id }));
        self.refresh_state();
        self.push(Output::SaveConfig);
    }

    /// `clearNodeFailureIfNeeded`, on a PONG over this node's own link to `id`: a replica or a
    /// slot-less master at once; a master still owning slots only after twice the node
    /// timeout (nobody took its slots over).
    pub(crate) fn clear_failure_if_needed(&mut self, id: &NodeId, now: u64) {
        let undo = self.config.node_timeout.as_millis() * 2;
        // Looked at for writing only when FAIL is set (a write is a new table version).
        if !self.node(id).is_some_and(Node::is_failed) {
            return;
        }
        let Some(node) = self.topology.node_mut(id) else {
            return;
        };
        let serving = node.is_master() && node.has_slots();
        if !serving || now.saturating_sub(node.fail_time) > undo {
            node.set(NodeFlags::FAIL, false);
            self.push(Output::Event(Event::NodeRecovered { node: *id }));
            self.refresh_state();
            self.push(Output::SaveConfig);
        }
    }
}
