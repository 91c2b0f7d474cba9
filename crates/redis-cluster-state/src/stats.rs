//! [`Stats`]: the bus messages a node sent and received, by type, as CLUSTER INFO reports
//! them.

/// Bus messages sent and received, by type, for CLUSTER INFO.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub(crate) sent: [u64; 11],
    pub(crate) received: [u64; 11],
}

impl Stats {
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
