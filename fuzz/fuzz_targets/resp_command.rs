//! Any bytes, fed in any chunking, as client commands: the same commands come out however the
//! bytes are split, nothing panics, and each command re-encoded as a multibulk decodes to the
//! same arguments.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redis_resp::{Decoder, encode_command};

fn all_commands(wire: &[u8], read: usize) -> (Vec<Vec<Vec<u8>>>, Option<redis_resp::DecodeError>) {
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    for chunk in wire.chunks(read) {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode_command(&mut buf) {
                Ok(Some(command)) => commands.push(command.args().map(<[u8]>::to_vec).collect()),
                Ok(None) => break,
                Err(e) => return (commands, Some(e)),
            }
        }
    }
    (commands, None)
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, wire)) = input.split_first() else {
        return;
    };
    let whole = all_commands(wire, wire.len().max(1));
    let split = all_commands(wire, usize::from(seed % 32) + 1);
    assert_eq!(whole.0, split.0);
    assert_eq!(whole.1.is_some(), split.1.is_some());
    for args in &whole.0 {
        assert!(!args.is_empty());
        let mut out = Vec::new();
        encode_command(args, &mut out);
        let (again, error) = all_commands(&out, out.len());
        assert!(error.is_none());
        assert_eq!(&again, &[args.clone()]);
    }
});
