//! Just enough of the capture formats to get the TCP byte streams out of a capture of a bus
//! port: classic pcap (either byte order, micro- or nanosecond timestamps) and pcapng (the
//! default of dumpcap, Wireshark and recent tcpdump builds: sections of either byte order,
//! several interfaces, any `if_tsresol`, enhanced, simple and obsolete packet blocks) over
//! Ethernet, BSD loopback, Linux cooked (v1 and v2) or raw IP, carrying IPv4 or IPv6.
//! Malformed records are skipped, never trusted: every length is checked against the bytes
//! there are.

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

/// The first bytes of a pcapng file: a section header block's type.
pub(crate) const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Every TCP segment of a pcap or pcapng file, in capture order.
pub(crate) fn segments(file: &[u8]) -> Result<Vec<Segment<'_>>, String> {
    let head = file.get(..24).ok_or("too short for a pcap file")?;
    let magic = [head[0], head[1], head[2], head[3]];
    let (little, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (true, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (false, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (false, true),
        PCAPNG_MAGIC => return pcapng_segments(file),
        _ => return Err(format!("not a pcap file (magic {magic:02x?})")),
    };
    let u32_at = |bytes: &[u8], at: usize| u32_in(little, bytes, at);
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

/// The `u32` at `at` of `bytes`, in the file's byte order.
fn u32_in(little: bool, bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if little {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

/// The `u16` at `at` of `bytes`, in the file's byte order.
fn u16_in(little: bool, bytes: &[u8], at: usize) -> Option<u16> {
    let b: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(if little {
        u16::from_le_bytes(b)
    } else {
        u16::from_be_bytes(b)
    })
}

/// What a pcapng interface description block says of the packets that name it.
#[derive(Clone, Copy, Debug)]
struct Interface {
    /// The link type (the same numbers as a pcap header's).
    link: u32,
    /// The capture length limit, 0 for none (a simple packet block's data is cut to it).
    snaplen: u32,
    /// Timestamp units per second: `if_tsresol`, 10⁶ when absent.
    units: u128,
    /// `if_tsoffset`: seconds added to every timestamp.
    offset: i64,
}

/// Every TCP segment of a pcapng file, in capture order: each section (a section header
/// block, in its own byte order) numbers its interfaces from 0 in the order they are
/// described. Blocks of other types (statistics, name resolution, custom …) are skipped, and
/// so is a packet of an interface not described; a block whose length cannot be right ends
/// the file, as a capture cut short does.
fn pcapng_segments(file: &[u8]) -> Result<Vec<Segment<'_>>, String> {
    let mut out = Vec::new();
    let mut little = true;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut rest = file;
    while rest.len() >= 12 {
        if rest[..4] == PCAPNG_MAGIC {
            // The byte-order magic, 0x1A2B3C4D as the section writes it, tells its order.
            little = match rest[8..12] {
                [0x4d, 0x3c, 0x2b, 0x1a] => true,
                [0x1a, 0x2b, 0x3c, 0x4d] => false,
                _ if rest.len() == file.len() => {
                    return Err("not a pcapng file: no byte-order magic".into());
                }
                _ => break,
            };
            interfaces.clear();
        }
        let (Some(kind), Some(length)) = (u32_in(little, rest, 0), u32_in(little, rest, 4)) else {
            break;
        };
        let length = length as usize;
        let Some(block) = rest
            .get(..length)
            .filter(|_| length >= 12 && length % 4 == 0)
        else {
            break;
        };
        rest = &rest[length..];
        let body = &block[8..length - 4];
        if kind == 1 {
            // One that cannot be read still takes its number: its packets are skipped.
            interfaces.push(interface(little, body).unwrap_or(Interface {
                link: u32::MAX,
                snaplen: 0,
                units: 1_000_000,
                offset: 0,
            }));
        } else if let Some((link, time, frame)) = packet(little, kind, body, &interfaces) {
            if let Some(segment) = network_layer(link, frame).and_then(|ip| tcp(time, ip)) {
                out.push(segment);
            }
        }
    }
    Ok(out)
}

/// The link type, time and frame of a packet block of type `kind`, `None` for a block of
/// another type or one that does not read.
fn packet<'a>(
    little: bool,
    kind: u32,
    body: &'a [u8],
    interfaces: &[Interface],
) -> Option<(u32, (u32, u32), &'a [u8])> {
    match kind {
        // Enhanced (6) and obsolete (2) packet blocks: the interface (32 bits, or 16 and a
        // drop count), the timestamp's two halves, the captured length, the original length.
        6 | 2 => {
            let id = if kind == 6 {
                u32_in(little, body, 0)?
            } else {
                u32::from(u16_in(little, body, 0)?)
            };
            let interface = interfaces.get(id as usize)?;
            let ticks =
                u64::from(u32_in(little, body, 4)?) << 32 | u64::from(u32_in(little, body, 8)?);
            let caplen = u32_in(little, body, 12)? as usize;
            let frame = body.get(20..20usize.checked_add(caplen)?)?;
            Some((interface.link, timestamp(interface, ticks), frame))
        }
        // A simple packet block: interface 0, no timestamp, the original length, and the
        // data cut to the interface's snap length.
        3 => {
            let interface = interfaces.first()?;
            let mut caplen = u32_in(little, body, 0)? as usize;
            if interface.snaplen != 0 {
                caplen = caplen.min(interface.snaplen as usize);
            }
            let data = body.get(4..)?;
            Some((interface.link, (0, 0), data.get(..caplen.min(data.len()))?))
        }
        _ => None,
    }
}

/// An interface description block's body: link type, snap length, and the two options that
/// change how its packets' timestamps read.
fn interface(little: bool, body: &[u8]) -> Option<Interface> {
    let mut interface = Interface {
        link: u32::from(u16_in(little, body, 0)?),
        snaplen: u32_in(little, body, 4)?,
        units: 1_000_000,
        offset: 0,
    };
    let mut options = body.get(8..).unwrap_or_default();
    while let (Some(code), Some(length)) = (u16_in(little, options, 0), u16_in(little, options, 2))
    {
        let length = usize::from(length);
        let Some(value) = options.get(4..4 + length) else {
            break;
        };
        match (code, value) {
            (0, _) => break, // opt_endofopt
            // if_tsresol: 10^-n seconds, or 2^-n when the top bit is set.
            (9, [resolution]) => {
                let n = u32::from(resolution & 0x7f);
                // Beyond what 128 bits hold (no real clock), every timestamp reads as 0.
                interface.units = if resolution & 0x80 == 0 {
                    10u128.checked_pow(n)
                } else {
                    1u128.checked_shl(n)
                }
                .unwrap_or(u128::MAX);
            }
            // if_tsoffset: a signed count of seconds.
            (14, value) => {
                if let Ok(b) = <[u8; 8]>::try_from(value) {
                    interface.offset = if little {
                        i64::from_le_bytes(b)
                    } else {
                        i64::from_be_bytes(b)
                    };
                }
            }
            _ => {}
        }
        // Each option's value is padded to 32 bits.
        options = options
            .get(4 + length.next_multiple_of(4)..)
            .unwrap_or_default();
    }
    Some(interface)
}

/// A pcapng timestamp, in its interface's units, as seconds and nanoseconds (seconds beyond
/// what 32 bits hold saturate, as the classic format cannot say them either).
fn timestamp(interface: &Interface, ticks: u64) -> (u32, u32) {
    let ticks = u128::from(ticks);
    let seconds = (ticks / interface.units) as i128 + i128::from(interface.offset);
    let nanos = (ticks % interface.units) * 1_000_000_000 / interface.units;
    (
        seconds.clamp(0, i128::from(u32::MAX)) as u32,
        // Below 10⁹ by construction.
        nanos as u32,
    )
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
