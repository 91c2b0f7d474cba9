//! [`Stats`]: the bus messages a node sent and received, by type, and the links it freed
//! for their send buffers, as CLUSTER INFO reports them.

/// Bus messages sent and received, by type, and links freed, for CLUSTER INFO.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    sent: [u64; 11],
    received: [u64; 11],
    /// Links the driver freed over `cluster-link-sendbuf-limit`.
    pub(crate) links_over_limit: u64,
}

impl Stats {
    /// The counts of messages sent (`true`) or received, by type number.
    pub(crate) fn counts(&self, sent: bool) -> &[u64; 11] {
        match sent {
            true => &self.sent,
            false => &self.received,
        }
    }

    /// One more message of type `kind` (0 to 10; others are not counted).
    pub(crate) fn count(&mut self, kind: u16, sent: bool) {
        let counts = match sent {
            true => &mut self.sent,
            false => &mut self.received,
        };
        if let Some(count) = counts.get_mut(usize::from(kind)) {
            *count += 1;
        }
    }
}
