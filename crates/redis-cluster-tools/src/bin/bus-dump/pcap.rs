//! Just enough of the pcap format to get the TCP byte streams out of a capture of a bus port:
//! classic pcap (either byte order, micro- or nanosecond timestamps) over Ethernet, BSD
//! loopback, Linux cooked (v1 and v2) or raw IP, carrying IPv4 or IPv6. Malformed records are
//! skipped, never trusted: every length is checked against the bytes there are.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One direction of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Flow {
    /// The sender.
    pub(crate) src: SocketAddr,
    /// The receiver.
    pub(crate) dst: SocketAddr,
}

/// A TCP segment of the capture.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment<'a> {
    /// When it was captured: seconds and nanoseconds.
    pub(crate) time: (u32, u32),
    /// Its direction.
    pub(crate) flow: Flow,
    /// Its sequence number.
    pub(crate) seq: u32,
    /// Whether it opens the connection (SYN).
    pub(crate) syn: bool,
    /// Its payload.
    pub(crate) payload: &'a [u8],
}

/// Every TCP segment of a pcap file, in capture order.
pub(crate) fn segments(file: &[u8]) -> Result<Vec<Segment<'_>>, String> {
    let head = file.get(..24).ok_or("too short for a pcap file")?;
    let magic = [head[0], head[1], head[2], head[3]];
    let (little, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (true, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (false, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (false, true),
        [0x0a, 0x0d, 0x0d, 0x0a] => return Err("pcapng is not supported: save as pcap".into()),
        _ => return Err(format!("not a pcap file (magic {magic:02x?})")),
    };
    let u32_at = |bytes: &[u8], at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let link = u32_at(head, 20).ok_or("pcap header")?;
    let mut out = Vec::new();
    let mut rest = file.get(24..).unwrap_or_default();
    while let (Some(seconds), Some(fraction), Some(caplen)) =
        (u32_at(rest, 0), u32_at(rest, 4), u32_at(rest, 8))
    {
        let Some(frame) = rest.get(16..16 + caplen as usize) else {
            break; // the capture stopped in the middle of a record
        };
        rest = &rest[16 + frame.len()..];
        let time = (
            seconds,
            if nanos {
                fraction
            } else {
                fraction.saturating_mul(1000)
            },
        );
        if let Some(segment) = network_layer(link, frame).and_then(|ip| tcp(time, ip)) {
            out.push(segment);
        }
    }
    Ok(out)
}

/// The IP packet inside a link-layer frame.
fn network_layer(link: u32, frame: &[u8]) -> Option<&[u8]> {
    match link {
        // Ethernet, with at most one VLAN tag.
        1 => {
            let mut ethertype = frame.get(12..14)?;
            let mut at = 14;
            if ethertype == [0x81, 0x00] {
                ethertype = frame.get(16..18)?;
                at = 18;
            }
            matches!(ethertype, [0x08, 0x00] | [0x86, 0xdd]).then(|| frame.get(at..))?
        }
        // BSD loopback: a 4-byte address family, then IP.
        0 | 108 => frame.get(4..),
        // Raw IP.
        12 | 101 => Some(frame),
        // Linux cooked capture v1 and v2.
        113 => frame.get(16..),
        276 => frame.get(20..),
        _ => None,
    }
}

/// The TCP segment inside an IPv4 or IPv6 packet (IPv6 extension headers are not followed).
fn tcp(time: (u32, u32), ip: &[u8]) -> Option<Segment<'_>> {
    let (src, dst, tcp) = match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes(ip.get(2..4)?.try_into().ok()?));
            if *ip.get(9)? != 6 || ihl < 20 {
                return None;
            }
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            // Ethernet pads short frames: the IP length says where the packet ends.
            let packet = ip.get(..total.min(ip.len()))?;
            (
                IpAddr::V4(Ipv4Addr::from(src)),
                IpAddr::V4(Ipv4Addr::from(dst)),
                packet.get(ihl..)?,
            )
        }
        6 => {
            let payload_len = usize::from(u16::from_be_bytes(ip.get(4..6)?.try_into().ok()?));
            if *ip.get(6)? != 6 {
                return None;
            }
            let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            let end = (40 + payload_len).min(ip.len());
            (
                IpAddr::V6(Ipv6Addr::from(src)),
                IpAddr::V6(Ipv6Addr::from(dst)),
                ip.get(40..end)?,
            )
        }
        _ => return None,
    };
    let port = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes(tcp.get(at..at + 2)?.try_into().ok()?))
    };
    let data_offset = usize::from(tcp.get(12)? >> 4) * 4;
    Some(Segment {
        time,
        flow: Flow {
            src: SocketAddr::new(src, port(0)?),
            dst: SocketAddr::new(dst, port(2)?),
        },
        seq: u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?),
        syn: tcp.get(13)? & 0x02 != 0,
        payload: tcp.get(data_offset..)?,
    })
}

/// One direction's bytes, in sequence order.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    /// The sequence number of the next byte expected, once known.
    next: Option<u32>,
    /// Bytes received and not consumed yet.
    pub(crate) bytes: Vec<u8>,
    /// Set when bytes went missing (a segment the capture lacks): what follows starts at an
    /// unknown point of the stream.
    pub(crate) gap: bool,
}

/// The TCP streams of a capture, reassembled as segments come.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    flows: HashMap<Flow, Stream>,
}

impl Streams {
    /// Adds a segment to its stream and returns the stream. A retransmission adds only what
    /// is new; a segment beyond a hole sets [`Stream::gap`]; one without data changes nothing.
    pub(crate) fn push(&mut self, segment: &Segment<'_>) -> &mut Stream {
        let stream = self.flows.entry(segment.flow).or_default();
        if segment.payload.is_empty() && !segment.syn {
            return stream; // an ACK or a FIN: no data
        }
        let start = segment.seq.wrapping_add(u32::from(segment.syn));
        let next = *stream.next.get_or_insert(start);
        let ahead = start.wrapping_sub(next);
        let behind = next.wrapping_sub(start);
        let new = if ahead == 0 {
            segment.payload
        } else if ahead < u32::MAX / 2 {
            // A hole: those bytes were not captured.
            stream.gap = true;
            segment.payload
        } else {
            segment.payload.get(behind as usize..).unwrap_or_default()
        };
        stream.bytes.extend_from_slice(new);
        let end = start.wrapping_add(segment.payload.len() as u32);
        if ahead < u32::MAX / 2 || end.wrapping_sub(next) < u32::MAX / 2 {
            stream.next = Some(end);
        }
        stream
    }
}
