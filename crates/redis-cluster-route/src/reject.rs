//! What a server answers to a command it refuses before running it: an unknown command, an
//! unknown subcommand, a wrong number of arguments. A proxy or a server built on this crate
//! answers with the same bytes, so that a client cannot tell it from the real server.

use alloc::vec::Vec;

use crate::{spec::CommandSpec, table::CommandTable};

/// How long a name or an argument may be in the server's error text (its `%.128s`), and how
/// much quoted argument text it writes at most before it stops adding arguments.
const CUT: usize = 128;

/// Why the server refuses a command before it runs it, in the order it checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The table has no command of this name (or `argv` is empty).
    #[error("unknown command")]
    UnknownCommand,
    /// A container command (CLUSTER, CONFIG, OBJECT, …) with no such subcommand.
    #[error("unknown subcommand")]
    UnknownSubcommand,
    /// The arguments do not satisfy the arity of this command or subcommand.
    #[error("wrong number of arguments for '{}' command", .0.name)]
    WrongArity(&'static CommandSpec),
}

impl CommandTable {
    /// The command `argv` runs, checked as Redis 7.0 checks it before it runs anything: the
    /// command (or the container's subcommand) must exist, then its arity must accept
    /// `argv.len()`. A container alone is looked up as itself, and fails on its arity.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Rejection};
    ///
    /// let table = CommandTable::REDIS_7_0;
    /// assert_eq!(table.check(&["GET", "k"]).map(|spec| spec.name), Ok("get"));
    /// let argv = ["object", "encoding"];
    /// let rejection = table.check(&argv).unwrap_err();
    /// assert!(matches!(rejection, Rejection::WrongArity(_)));
    /// assert_eq!(
    ///     rejection.error_line(&argv),
    ///     b"ERR wrong number of arguments for 'object|encoding' command"
    /// );
    /// ```
    pub fn check<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<&'static CommandSpec, Rejection> {
        let Some(name) = argv.first() else {
            return Err(Rejection::UnknownCommand);
        };
        let command = self
            .command(name.as_ref())
            .ok_or(Rejection::UnknownCommand)?;
        let spec = match argv.get(1) {
            Some(sub) if !command.subcommands.is_empty() => command
                .subcommand(sub.as_ref())
                .ok_or(Rejection::UnknownSubcommand)?,
            _ => command,
        };
        if spec.accepts_argc(argv.len()) {
            Ok(spec)
        } else {
            Err(Rejection::WrongArity(spec))
        }
    }
}

impl Rejection {
    /// The error line the server sends for this rejection of `argv` (without the leading `-`
    /// and the CRLF), byte for byte as Redis 7.0.15 writes it:
    /// - `ERR unknown command '<name>', with args beginning with: '<arg>' '<arg>' `: the name
    ///   cut at 128 bytes, then the arguments quoted, each cut to what is left of 128 bytes,
    ///   until the quoted text reaches 128 bytes;
    /// - `ERR unknown subcommand '<sub>'. Try <NAME> HELP.`, the name as sent, in upper case;
    /// - `ERR wrong number of arguments for '<name>' command`, a subcommand named
    ///   `container|sub`.
    ///
    /// As the server's C strings do, a name or an argument ends at its first NUL byte, and CR
    /// and LF become spaces, so that the line stays one line.
    pub fn error_line<A: AsRef<[u8]>>(&self, argv: &[A]) -> Vec<u8> {
        let mut line = Vec::with_capacity(64);
        let name = argv.first().map_or(&[][..], AsRef::as_ref);
        match self {
            Self::UnknownCommand => {
                line.extend_from_slice(b"ERR unknown command '");
                push_cut(&mut line, name, CUT);
                line.extend_from_slice(b"', with args beginning with: ");
                let start = line.len();
                for arg in argv.iter().skip(1) {
                    let written = line.len() - start;
                    if written >= CUT {
                        break;
                    }
                    line.push(b'\'');
                    push_cut(&mut line, arg.as_ref(), CUT - written);
                    line.extend_from_slice(b"' ");
                }
            }
            Self::UnknownSubcommand => {
                line.extend_from_slice(b"ERR unknown subcommand '");
                push_cut(&mut line, argv.get(1).map_or(&[][..], AsRef::as_ref), CUT);
                line.extend_from_slice(b"'. Try ");
                let start = line.len();
                push_cut(&mut line, name, usize::MAX);
                line[start..].make_ascii_uppercase();
                line.extend_from_slice(b" HELP.");
            }
            Self::WrongArity(spec) => {
                line.extend_from_slice(b"ERR wrong number of arguments for '");
                line.extend_from_slice(spec.name.as_bytes());
                line.extend_from_slice(b"' command");
            }
        }
        for byte in &mut line {
            if matches!(*byte, b'\r' | b'\n') {
                *byte = b' ';
            }
        }
        line
    }
}

/// `text` up to its first NUL and at most `max` bytes, as C's `%.*s` writes it.
fn push_cut(line: &mut Vec<u8>, text: &[u8], max: usize) {
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    line.extend_from_slice(&text[..end.min(max)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(argv: &[&[u8]]) -> Vec<u8> {
        let table = CommandTable::REDIS_7_0;
        match table.check(argv) {
            Ok(spec) => panic!("{} accepted", spec.name),
            Err(rejection) => rejection.error_line(argv),
        }
    }

    /// The replies of a real redis-server 7.0.15 to the same requests, copied from the wire.
    #[test]
    fn the_real_servers_texts() {
        let y = [b'y'; 50];
        let x = [b'x'; 200];
        let cases: [(&[&[u8]], &[u8]); 9] = [
            (
                &[b"cluster", b"foo"],
                b"ERR unknown subcommand 'foo'. Try CLUSTER HELP.",
            ),
            (
                &[b"cluster"],
                b"ERR wrong number of arguments for 'cluster' command",
            ),
            (
                &[b"Object", b"xyz"],
                b"ERR unknown subcommand 'xyz'. Try OBJECT HELP.",
            ),
            (
                &[b"GET"],
                b"ERR wrong number of arguments for 'get' command",
            ),
            (
                &[b"object", b"encoding"],
                b"ERR wrong number of arguments for 'object|encoding' command",
            ),
            (
                &[b"cluster", b"countkeysinslot"],
                b"ERR wrong number of arguments for 'cluster|countkeysinslot' command",
            ),
            (
                &[b"a\r\nb", b"c\r\n"],
                b"ERR unknown command 'a  b', with args beginning with: 'c  ' ",
            ),
            (
                &[b"fo\x00o", b"a\x00b"],
                b"ERR unknown command 'fo', with args beginning with: 'a' ",
            ),
            (
                &[b"config", b"ab\r\nc"],
                b"ERR unknown subcommand 'ab  c'. Try CONFIG HELP.",
            ),
        ];
        for (argv, expected) in cases {
            assert_eq!(line(argv), expected, "{argv:?}");
        }
        let long: [&[u8]; 6] = [&x, &y, &y, &y, &y, &y];
        let mut expected = b"ERR unknown command '".to_vec();
        expected.extend_from_slice(&x[..128]);
        expected.extend_from_slice(b"', with args beginning with: ");
        for n in [50, 50, 22] {
            expected.push(b'\'');
            expected.extend_from_slice(&y[..n]);
            expected.extend_from_slice(b"' ");
        }
        assert_eq!(line(&long), expected);
        let sub: [&[u8]; 2] = [b"config", &[b'y'; 200]];
        let mut expected = b"ERR unknown subcommand '".to_vec();
        expected.extend_from_slice(&[b'y'; 128]);
        expected.extend_from_slice(b"'. Try CONFIG HELP.");
        assert_eq!(line(&sub), expected);
    }

    #[test]
    fn accepted_commands_and_empty_argv() {
        let table = CommandTable::REDIS_7_0;
        let spec = table.check(&["cluster", "INFO"]).map(|s| s.name);
        assert_eq!(spec, Ok("cluster|info"));
        assert_eq!(
            table.check(&["set", "k", "v", "EX", "1"]).map(|s| s.name),
            Ok("set")
        );
        let empty: [&[u8]; 0] = [];
        assert_eq!(table.check(&empty), Err(Rejection::UnknownCommand));
        let text = Rejection::UnknownCommand.error_line(&empty);
        assert_eq!(text, b"ERR unknown command '', with args beginning with: ");
    }
}
