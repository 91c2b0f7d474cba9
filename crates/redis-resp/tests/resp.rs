//! The codec through its public API: every type, every rule, every limit, then properties.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use redis_resp::{
    Config, DecodeError, Decoder, ErrorKind, Frame, IntegerError, Kind, Limits, Span, Status,
    decode, encode, encode_command, encoded_len,
};

type F = Frame<&'static [u8]>;

fn b(s: &'static str) -> &'static [u8] {
    s.as_bytes()
}

/// Decodes `input` every way there is and checks that they agree, that the frame takes all of
/// `input`, and that it encodes back to `input`. Returns the frame.
fn round_trip(input: &[u8]) -> Frame<Bytes> {
    round_trip_with(input, Config::default())
}

fn round_trip_with(input: &[u8], config: Config) -> Frame<Bytes> {
    let mut decoder = Decoder::with_config(config);
    let Ok(Status::Complete((frame, used))) = decoder.decode_slice(input) else {
        panic!(
            "{:?} did not decode: {:?}",
            String::from_utf8_lossy(input),
            decoder.decode_slice(input)
        );
    };
    assert_eq!(used, input.len(), "{:?}", String::from_utf8_lossy(input));
    let owned = frame.to_owned_frame();

    // All at once through the resumable decoder (its fast paths), the next frame kept.
    let mut whole = BytesMut::from(input);
    whole.extend_from_slice(b"+next\r\n");
    let at_once = Decoder::with_config(config).decode(&mut whole);
    assert_eq!(at_once, Ok(Some(owned.clone())));
    assert_eq!(&whole[..], b"+next\r\n");

    // Byte by byte through the resumable decoder.
    let mut buf = BytesMut::new();
    let mut streamed = None;
    for (i, &byte) in input.iter().enumerate() {
        buf.extend_from_slice(&[byte]);
        match decoder.decode(&mut buf) {
            Ok(Some(f)) => {
                assert_eq!(i + 1, input.len(), "complete before the end");
                streamed = Some(f);
            }
            Ok(None) => assert!(i + 1 < input.len(), "incomplete at the end"),
            Err(e) => panic!("byte {i}: {e}"),
        }
    }
    assert_eq!(streamed.as_ref(), Some(&owned));
    assert!(buf.is_empty());

    // The span agrees.
    assert_eq!(
        decoder.decode_span(input),
        Ok(Status::Complete(Span {
            len: input.len(),
            kind: Kind(input[0])
        }))
    );

    let mut out = Vec::new();
    encode(&owned, &mut out);
    assert_eq!(
        out,
        input,
        "re-encoding {:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(encoded_len(&owned), input.len());
    owned
}

fn error_of(input: &[u8]) -> DecodeError {
    error_with(input, Config::default())
}

fn error_with(input: &[u8], config: Config) -> DecodeError {
    let mut decoder = Decoder::with_config(config);
    match decoder.decode_slice(input) {
        Err(e) => {
            // The resumable decoder finds the same error, fed in two pieces.
            let mut buf = BytesMut::from(&input[..input.len() / 2]);
            let first = decoder.decode(&mut buf);
            let second = first.and_then(|_| {
                buf.extend_from_slice(&input[input.len() / 2..]);
                decoder.decode(&mut buf)
            });
            assert_eq!(second, Err(e), "{:?}", String::from_utf8_lossy(input));
            e
        }
        other => panic!("{:?} decoded: {other:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn every_type_decodes_and_re_encodes() {
    let cases: Vec<(&[u8], F)> = vec![
        (b"+OK\r\n", Frame::SimpleString(b("OK"))),
        (b"+\r\n", Frame::SimpleString(b(""))),
        (b"-ERR unknown command\r\n", Frame::SimpleError(b("ERR unknown command"))),
        (b":0\r\n", Frame::Integer(0)),
        (b":-1\r\n", Frame::Integer(-1)),
        (b":9223372036854775807\r\n", Frame::Integer(i64::MAX)),
        (b":-9223372036854775808\r\n", Frame::Integer(i64::MIN)),
        (b"$5\r\nhello\r\n", Frame::BulkString(b("hello"))),
        (b"$0\r\n\r\n", Frame::BulkString(b(""))),
        (b"$4\r\na\r\nb\r\n", Frame::BulkString(b("a\r\nb"))),
        (b"$-1\r\n", Frame::NullBulkString),
        (b"*-1\r\n", Frame::NullArray),
        (b"*0\r\n", Frame::Array(vec![])),
        (
            b"*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n",
            Frame::Array(vec![Frame::BulkString(b("foo")), Frame::BulkString(b("bar"))]),
        ),
        (
            b"*3\r\n:1\r\n*1\r\n$-1\r\n*-1\r\n",
            Frame::Array(vec![
                Frame::Integer(1),
                Frame::Array(vec![Frame::NullBulkString]),
                Frame::NullArray,
            ]),
        ),
        (b"_\r\n", Frame::Null),
        (b"#t\r\n", Frame::Boolean(true)),
        (b"#f\r\n", Frame::Boolean(false)),
        (b",1.23\r\n", Frame::Double(b("1.23"))),
        (b",10\r\n", Frame::Double(b("10"))),
        (b",inf\r\n", Frame::Double(b("inf"))),
        (b",-inf\r\n", Frame::Double(b("-inf"))),
        (b",nan\r\n", Frame::Double(b("nan"))),
        (b",-nan\r\n", Frame::Double(b("-nan"))),
        (b",1.0000000000000001e+20\r\n", Frame::Double(b("1.0000000000000001e+20"))),
        (b",-1.5E-7\r\n", Frame::Double(b("-1.5E-7"))),
        (
            b"(3492890328409238509324850943850943825024385\r\n",
            Frame::BigNumber(b("3492890328409238509324850943850943825024385")),
        ),
        (b"(-5\r\n", Frame::BigNumber(b("-5"))),
        (b"!21\r\nSYNTAX invalid syntax\r\n", Frame::BulkError(b("SYNTAX invalid syntax"))),
        (
            b"=15\r\ntxt:Some string\r\n",
            Frame::VerbatimString {
                format: *b"txt",
                text: b("Some string"),
            },
        ),
        (
            b"=4\r\nmkd:\r\n",
            Frame::VerbatimString {
                format: *b"mkd",
                text: b(""),
            },
        ),
        (
            b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n",
            Frame::Map(vec![
                (Frame::SimpleString(b("first")), Frame::Integer(1)),
                (Frame::SimpleString(b("second")), Frame::Integer(2)),
            ]),
        ),
        (
            b"%2\r\n+k\r\n:1\r\n+k\r\n:2\r\n",
            Frame::Map(vec![
                (Frame::SimpleString(b("k")), Frame::Integer(1)),
                (Frame::SimpleString(b("k")), Frame::Integer(2)),
            ]),
        ),
        (b"%0\r\n", Frame::Map(vec![])),
        (
            b"~3\r\n+b\r\n+a\r\n+b\r\n",
            Frame::Set(vec![
                Frame::SimpleString(b("b")),
                Frame::SimpleString(b("a")),
                Frame::SimpleString(b("b")),
            ]),
        ),
        (
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
            Frame::Push(vec![
                Frame::BulkString(b("message")),
                Frame::BulkString(b("ch")),
                Frame::BulkString(b("hi")),
            ]),
        ),
        (
            b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
            Frame::Attributed {
                attributes: vec![(
                    Frame::SimpleString(b("key-popularity")),
                    Frame::Map(vec![
                        (Frame::BulkString(b("a")), Frame::Double(b("0.1923"))),
                        (Frame::BulkString(b("b")), Frame::Double(b("0.0012"))),
                    ]),
                )],
                value: Box::new(Frame::Array(vec![Frame::Integer(2039123), Frame::Integer(9543892)])),
            },
        ),
        (
            b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n",
            Frame::Array(vec![
                Frame::Integer(1),
                Frame::Attributed {
                    attributes: vec![(Frame::SimpleString(b("ttl")), Frame::Integer(3600))],
                    value: Box::new(Frame::Integer(2)),
                },
            ]),
        ),
        (
            b"|0\r\n|1\r\n+a\r\n+b\r\n>1\r\n+x\r\n",
            Frame::Attributed {
                attributes: vec![],
                value: Box::new(Frame::Attributed {
                    attributes: vec![(Frame::SimpleString(b("a")), Frame::SimpleString(b("b")))],
                    value: Box::new(Frame::Push(vec![Frame::SimpleString(b("x"))])),
                }),
            },
        ),
        (
            b"$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;1\r\nd\r\n;0\r\n",
            Frame::StreamedString(vec![b("Hell"), b("o wor"), b("d")]),
        ),
        (b"$?\r\n;0\r\n", Frame::StreamedString(vec![])),
        (
            b"*?\r\n:1\r\n:2\r\n:3\r\n.\r\n",
            Frame::StreamedArray(vec![Frame::Integer(1), Frame::Integer(2), Frame::Integer(3)]),
        ),
        (b"*?\r\n.\r\n", Frame::StreamedArray(vec![])),
        (
            b"~?\r\n+a\r\n.\r\n",
            Frame::StreamedSet(vec![Frame::SimpleString(b("a"))]),
        ),
        (
            b"%?\r\n+a\r\n:1\r\n+b\r\n:2\r\n.\r\n",
            Frame::StreamedMap(vec![
                (Frame::SimpleString(b("a")), Frame::Integer(1)),
                (Frame::SimpleString(b("b")), Frame::Integer(2)),
            ]),
        ),
        (
            b"*?\r\n*?\r\n$?\r\n;1\r\nx\r\n;0\r\n.\r\n.\r\n",
            Frame::StreamedArray(vec![Frame::StreamedArray(vec![Frame::StreamedString(vec![b("x")])])]),
        ),
    ];
    for (input, expected) in cases {
        let frame = round_trip(input);
        let expected = expected.to_owned_frame();
        assert_eq!(frame, expected, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn accessors() {
    let Status::Complete((frame, _)) = decode(b",-1.5e3\r\n").expect("valid") else {
        panic!("complete")
    };
    assert_eq!(frame.to_f64(), Some(-1500.0));
    assert_eq!(frame.kind(), Kind::DOUBLE);
    let nan: F = Frame::Double(b("-nan"));
    assert!(nan.to_f64().is_some_and(f64::is_nan));
    assert_eq!(
        Frame::<&[u8]>::Double(b("inf")).to_f64(),
        Some(f64::INFINITY)
    );
    assert!(Frame::<&[u8]>::NullArray.is_null() && Frame::<&[u8]>::Null.is_null());
    assert!(Frame::SimpleError(b("ERR")).is_error());
    assert_eq!(Frame::BulkString(b("x")).as_bytes(), Some(&b"x"[..]));
    assert_eq!(Frame::<&[u8]>::Integer(1).as_bytes(), None);
    assert_eq!(Kind::MAP.to_string(), "'%'");
    assert_eq!(Kind(0).to_string(), "0x00");
}

#[test]
fn every_rule_has_its_error() {
    use ErrorKind::*;
    use IntegerError::*;
    let cases: &[(&[u8], usize, ErrorKind)] = &[
        (b"?x\r\n", 0, UnknownType(Kind(b'?'))),
        (b"+OK\rX", 4, BadLineEnd),
        (b"+O\nK\r\n", 2, BadLineEnd),
        (b"+O\rK\r\n", 3, BadLineEnd),
        (b":+5\r\n", 1, Integer(NotDigit)),
        (b":007\r\n", 2, Integer(LeadingZero)),
        // Leading zero before overflow, however much of it has arrived (found by fuzzing).
        (
            b":0000000000000000000000000000000001\r\n",
            2,
            Integer(LeadingZero),
        ),
        (b":-0\r\n", 2, Integer(LeadingZero)),
        (b": 5\r\n", 1, Integer(NotDigit)),
        (b":5 \r\n", 2, Integer(NotDigit)),
        (b":\r\n", 1, Integer(Empty)),
        (b":-\r\n", 2, Integer(Empty)),
        (b":9223372036854775808\r\n", 19, Integer(Overflow)),
        (b":-9223372036854775809\r\n", 20, Integer(Overflow)),
        (b":99999999999999999999999\r\n", 20, Integer(Overflow)),
        (b":1\rx", 3, BadLineEnd),
        (b"$03\r\nabc\r\n", 2, Integer(LeadingZero)),
        (b"$+3\r\nabc\r\n", 1, Integer(NotDigit)),
        (b"$3\r\nabcXY", 7, BadPayloadEnd),
        (b"$3\r\nabc\rX", 7, BadPayloadEnd),
        (b"$-2\r\n", 1, NegativeLength(-2)),
        (b"*-2\r\n", 1, NegativeLength(-2)),
        (b"%-1\r\n", 1, NegativeLength(-1)),
        (b"~-1\r\n", 1, NegativeLength(-1)),
        (b"!-1\r\n", 1, NegativeLength(-1)),
        (b"#x\r\n", 1, BadBoolean),
        (b"#tt\r\n", 1, BadBoolean),
        (b"_x\r\n", 1, BadNull),
        (b",abc\r\n", 1, BadDouble),
        (b",1.\r\n", 1, BadDouble),
        (b",+inf\r\n", 1, BadDouble),
        (b",\r\n", 1, BadDouble),
        (b"(12a\r\n", 1, BadBigNumber),
        (b"(\r\n", 1, BadBigNumber),
        (b"=3\r\ntxt\r\n", 1, BadVerbatim),
        (b"=5\r\ntxtxy\r\n", 4, BadVerbatim),
        (b";3\r\nabc\r\n", 0, StrayChunk),
        (b".\r\n", 0, StrayEnd),
        (b"*1\r\n.\r\n", 4, StrayEnd),
        (b"%?\r\n+a\r\n.\r\n", 8, StrayEnd),
        (b"$?\r\n+a\r\n", 4, ExpectedChunk(Kind(b'+'))),
        (b"$?x\r\n", 2, BadLineEnd),
        (b"*?\rx", 2, BadLineEnd),
    ];
    for &(input, offset, kind) in cases {
        assert_eq!(
            error_of(input),
            DecodeError { offset, kind },
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn incomplete_is_never_an_error() {
    for input in [
        &b""[..],
        b"+",
        b"+OK",
        b"+OK\r",
        b":12",
        b"$5\r\nhel",
        b"$5\r\nhello",
        b"$5\r\nhello\r",
        b"*2\r\n:1\r\n",
        b"%1\r\n+a\r\n",
        b"|1\r\n+a\r\n+b\r\n",
        b"$?\r\n;1\r\na\r\n",
        b"*?\r\n:1\r\n",
        b"#",
        b"#t",
        b"#t\r",
        b"_\r",
        b"=15\r\ntxt:Some",
        b"*-1\r",
    ] {
        assert!(
            matches!(decode(input), Ok(Status::Incomplete { .. })),
            "{:?}: {:?}",
            String::from_utf8_lossy(input),
            decode(input)
        );
    }
    assert_eq!(
        decode(b"$5\r\nhel"),
        Ok(Status::Incomplete { needed: Some(4) })
    );
}

#[test]
fn limits_are_checked_before_anything_is_reserved() {
    let tight = Config {
        limits: Limits {
            max_depth: 3,
            max_elements: 4,
            max_bulk_len: 10,
            max_inline_len: 16,
            max_frame_len: 48,
        },
        lenient: false,
    };
    use ErrorKind::*;
    let cases: &[(&[u8], ErrorKind)] = &[
        (b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", TooDeep { max: 3 }),
        (b"*5\r\n", TooManyElements { len: 5, max: 4 }),
        (b"%5\r\n", TooManyElements { len: 5, max: 4 }),
        (
            b"*?\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n",
            TooManyElements { len: 5, max: 4 },
        ),
        (b"$11\r\n", BulkTooLong { len: 11, max: 10 }),
        (b"$?\r\n;11\r\n", BulkTooLong { len: 11, max: 10 }),
        (
            b"*4\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n$10\r\n",
            FrameTooLong { max: 48 },
        ),
    ];
    for &(input, kind) in cases {
        assert_eq!(
            error_with(input, tight).kind,
            kind,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Defaults: huge declarations cost nothing until their bytes arrive, and are then refused.
    assert_eq!(
        decode(b"*4294967295\r\n"),
        Err(DecodeError {
            offset: 1,
            kind: TooManyElements {
                len: 4294967295,
                max: i32::MAX as u64
            }
        })
    );
    assert_eq!(
        decode(b"*2147483647\r\n"),
        Ok(Status::Incomplete { needed: Some(1) })
    );
    assert_eq!(
        decode(b"$2147483648\r\n").map_err(|e| e.kind),
        Err(BulkTooLong {
            len: 2147483648,
            max: 512 * 1024 * 1024
        })
    );
    assert_eq!(
        decode(b"$536870912\r\n"),
        Ok(Status::Incomplete {
            needed: Some(536870914)
        })
    );
    // Deep nesting is an error, not a stack overflow.
    let deep = b"*1\r\n".repeat(100_000);
    assert_eq!(decode(&deep).map_err(|e| e.kind), Err(TooDeep { max: 128 }));
    let max_depth = Config {
        limits: Limits {
            max_depth: usize::MAX,
            ..Limits::DEFAULT
        },
        lenient: false,
    };
    let err = error_with(&deep, max_depth);
    assert_eq!(
        err.kind,
        TooDeep {
            max: Limits::MAX_DEPTH
        }
    );
}

#[test]
fn lenient_accepts_what_hiredis_accepts() {
    let lenient = Config {
        lenient: true,
        ..Config::default()
    };
    let mut decoder = Decoder::with_config(lenient);
    let cases: &[(&[u8], F)] = &[
        (b"$3\r\nabcXY", Frame::BulkString(b("abc"))),
        (b"+a\rb\r\n", Frame::SimpleString(b("a\rb"))),
        (b",+inf\r\n", Frame::Double(b("+inf"))),
        (b",.5\r\n", Frame::Double(b(".5"))),
    ];
    for (input, expected) in cases {
        let Ok(Status::Complete((frame, used))) = decoder.decode_slice(input) else {
            panic!("{:?}", String::from_utf8_lossy(input))
        };
        assert_eq!((&frame, used), (expected, input.len()));
    }
    // Integer rules stay the server's: hiredis uses the same ones.
    assert!(decoder.decode_slice(b":007\r\n").is_err());
}

#[test]
fn pipelined_frames_come_out_one_by_one() {
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::from(&b"+OK\r\n:1\r\n$-1\r\n*1\r\n_\r\n+PART"[..]);
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode(&mut buf).expect("valid") {
        frames.push(frame);
    }
    assert_eq!(frames.len(), 4);
    assert_eq!(&buf[..], b"+PART");
    assert_eq!(frames[2], Frame::NullBulkString);
}

#[test]
fn commands_multibulk() {
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::from(
        &b"*0\r\n*-1\r\n*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n"[..],
    );
    let set = decoder
        .decode_command(&mut buf)
        .expect("valid")
        .expect("complete");
    assert_eq!(set.len(), 3);
    assert_eq!(set.args().collect::<Vec<_>>(), [&b"SET"[..], b"k\r\n", b""]);
    assert_eq!(set.arg_bytes(1), Some(Bytes::from_static(b"k\r\n")));
    assert_eq!(set.arg(3), None);
    let ping = decoder
        .decode_command(&mut buf)
        .expect("valid")
        .expect("complete");
    assert_eq!(ping.arg(0), Some(&b"PING"[..]));
    assert!(buf.is_empty());
    // Borrowed: the empty commands before PING count in the bytes it took.
    let input = b"*0\r\n\r\n*1\r\n$4\r\nPING\r\n*1\r\n";
    let Ok(Status::Complete((ping, used))) = decoder.decode_command_slice(input) else {
        panic!("complete")
    };
    assert_eq!((ping.arg(0), used), (Some(&b"PING"[..]), 20));
    assert_eq!(
        decoder.decode_command_slice(&input[used..]),
        Ok(Status::Incomplete { needed: None })
    );

    // Many arguments spill to the heap and still read back.
    let args: Vec<Vec<u8>> = (0..20).map(|i| format!("arg{i}").into_bytes()).collect();
    let mut wire = Vec::new();
    encode_command(&args, &mut wire);
    let mut buf = BytesMut::from(&wire[..]);
    let command = decoder
        .decode_command(&mut buf)
        .expect("valid")
        .expect("complete");
    assert_eq!(command.args().map(<[u8]>::to_vec).collect::<Vec<_>>(), args);

    use ErrorKind::*;
    let errors: &[(&[u8], usize, ErrorKind)] = &[
        (b"*1\r\n:1\r\n", 4, ExpectedBulk(Kind(b':'))),
        (b"*1\r\n$-1\r\n", 5, NegativeLength(-1)),
        (b"*1\r\n$3\r\nabcXY", 11, BadPayloadEnd),
        (b"*x\r\n", 1, Integer(IntegerError::NotDigit)),
        (
            b"*1\r\n$03\r\nabc\r\n",
            6,
            Integer(IntegerError::LeadingZero),
        ),
    ];
    for &(input, offset, kind) in errors {
        assert_eq!(
            decoder.decode_command_slice(input).map(|_| ()),
            Err(DecodeError { offset, kind })
        );
        let mut buf = BytesMut::from(input);
        assert_eq!(
            decoder.decode_command(&mut buf),
            Err(DecodeError { offset, kind }),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn commands_inline_follow_the_server_quoting_rules() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"PING\r\n", &[b"PING"]),
        (b"PING\n", &[b"PING"]),
        (b"  SET  k   v \r\n", &[b"SET", b"k", b"v"]),
        (b"SET k \"a b\"\r\n", &[b"SET", b"k", b"a b"]),
        (
            b"SET k \"\\x41\\n\\t\\\"\\\\\\q\"\r\n",
            &[b"SET", b"k", b"A\n\t\"\\q"],
        ),
        (b"SET k 'it''s'\r\n", &[]),
        (b"SET k 'it\\'s'\r\n", &[b"SET", b"k", b"it's"]),
        (b"SET k 'a\\nb'\r\n", &[b"SET", b"k", b"a\\nb"]),
        (b"ECHO foo\"bar\"\r\n", &[b"ECHO", b"foobar"]),
        (b"ECHO \"\"\r\n", &[b"ECHO", b""]),
        (b"ECHO \"\\xzz\"\r\n", &[b"ECHO", b"xzz"]),
        (b"ECHO a\x0bb\r\n", &[b"ECHO", b"a\x0bb"]),
        (b"ECHO a\x00b c\r\n", &[b"ECHO", b"a"]),
    ];
    let mut decoder = Decoder::new();
    for &(input, expected) in cases {
        let mut buf = BytesMut::from(input);
        let result = decoder.decode_command(&mut buf);
        if expected.is_empty() {
            assert_eq!(
                result.map_err(|e| e.kind),
                Err(ErrorKind::UnbalancedQuotes),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            continue;
        }
        let command = result.expect("valid").expect("complete");
        assert_eq!(
            command.args().collect::<Vec<_>>(),
            expected,
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert!(buf.is_empty());
        // The borrowed path agrees.
        let Ok(Status::Complete((borrowed, used))) = decoder.decode_command_slice(input) else {
            panic!("{:?}", String::from_utf8_lossy(input))
        };
        assert_eq!(used, input.len());
        assert_eq!(borrowed.args().collect::<Vec<_>>(), expected);
    }
    for bad in [&b"ECHO \"abc\r\n"[..], b"ECHO 'abc\r\n", b"ECHO \"a\"b\r\n"] {
        let mut buf = BytesMut::from(bad);
        assert_eq!(
            decoder.decode_command(&mut buf).map_err(|e| e.kind),
            Err(ErrorKind::UnbalancedQuotes)
        );
    }
    // Blank lines are skipped; a line without its newline waits; an endless one is refused.
    let mut buf = BytesMut::from(&b"\r\n \n\r\nGET k"[..]);
    assert_eq!(decoder.decode_command(&mut buf), Ok(None));
    buf.extend_from_slice(b"\r\n");
    let get = decoder
        .decode_command(&mut buf)
        .expect("valid")
        .expect("complete");
    assert_eq!(get.args().collect::<Vec<_>>(), [&b"GET"[..], b"k"]);
    let mut endless = BytesMut::from(&vec![b'a'; 64 * 1024 + 1][..]);
    assert_eq!(
        decoder.decode_command(&mut endless).map_err(|e| e.kind),
        Err(ErrorKind::InlineTooLong { max: 64 * 1024 })
    );
}

#[cfg(feature = "codec")]
#[test]
fn tokio_util_codec_frames_in_and_out() {
    use redis_resp::codec::RespCodec;
    use tokio_util::codec::{Decoder as _, Encoder as _};

    let mut codec = RespCodec::default();
    let mut buf = BytesMut::from(&b"*1\r\n$2\r\nhi\r\n$"[..]);
    let frame = codec.decode(&mut buf).expect("valid").expect("complete");
    assert_eq!(
        frame,
        Frame::Array(vec![Frame::BulkString(Bytes::from_static(b"hi"))])
    );
    assert_eq!(codec.decode(&mut buf).expect("valid"), None);
    let mut out = BytesMut::new();
    codec.encode(&frame, &mut out).expect("encode");
    assert_eq!(&out[..], b"*1\r\n$2\r\nhi\r\n");
    let mut bad = BytesMut::from(&b"?\r\n"[..]);
    assert!(codec.decode(&mut bad).is_err());
}

/// Any frame, up to a small depth, including every streamed and attributed shape.
fn arb_frame() -> impl Strategy<Value = Frame<Bytes>> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from);
    let line = || "[a-zA-Z0-9 ._:-]{0,16}".prop_map(Bytes::from);
    let leaf = prop_oneof![
        line().prop_map(Frame::SimpleString),
        line().prop_map(Frame::SimpleError),
        any::<i64>().prop_map(Frame::Integer),
        bytes().prop_map(Frame::BulkString),
        Just(Frame::NullBulkString),
        Just(Frame::NullArray),
        Just(Frame::Null),
        any::<bool>().prop_map(Frame::Boolean),
        prop_oneof![
            any::<i32>().prop_map(|n| n.to_string()),
            (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
            Just("inf".to_string()),
            Just("-nan".to_string()),
            (1u32..10, -300i32..300).prop_map(|(a, e)| format!("{a}e{e:+}")),
        ]
        .prop_map(|s| Frame::Double(Bytes::from(s))),
        "-?[0-9]{1,40}".prop_map(|s| Frame::BigNumber(Bytes::from(s))),
        bytes().prop_map(Frame::BulkError),
        ("[a-z]{3}", bytes()).prop_map(|(f, text)| Frame::VerbatimString {
            format: f.as_bytes().try_into().expect("3 bytes"),
            text
        }),
        proptest::collection::vec(bytes().prop_filter("non-empty", |b| !b.is_empty()), 0..4)
            .prop_map(Frame::StreamedString),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let items = || proptest::collection::vec(inner.clone(), 0..6);
        let pairs = || proptest::collection::vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            items().prop_map(Frame::Array),
            items().prop_map(Frame::Set),
            items().prop_map(Frame::Push),
            pairs().prop_map(Frame::Map),
            items().prop_map(Frame::StreamedArray),
            items().prop_map(Frame::StreamedSet),
            pairs().prop_map(Frame::StreamedMap),
            (pairs(), inner.clone()).prop_map(|(attributes, value)| Frame::Attributed {
                attributes,
                value: Box::new(value)
            }),
        ]
    })
}

proptest! {
    #[test]
    fn any_frame_survives_any_split(frame in arb_frame(), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let mut wire = Vec::new();
        encode(&frame, &mut wire);
        prop_assert_eq!(encoded_len(&frame), wire.len());
        // One shot, borrowed.
        let Ok(Status::Complete((borrowed, used))) = decode(&wire) else {
            return Err(TestCaseError::fail(format!("{:?}", decode(&wire))));
        };
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(&borrowed.to_owned_frame(), &frame);
        // Resumable, in pieces cut at arbitrary points, with a frame after it.
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
        points.sort_unstable();
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        let mut last = 0;
        for point in points.into_iter().chain([wire.len()]) {
            buf.extend_from_slice(&wire[last..point]);
            last = point;
            if let Some(f) = decoder.decode(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))? {
                prop_assert!(got.is_none());
                got = Some(f);
            }
        }
        prop_assert_eq!(got.as_ref(), Some(&frame));
        prop_assert_eq!(decoder.decode_span(&wire), Ok(Status::Complete(Span { len: wire.len(), kind: frame.kind() })));
    }

    #[test]
    fn any_command_survives_any_split(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut wire = Vec::new();
        encode_command(&args, &mut wire);
        wire.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let cut = cut.index(wire.len());
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::from(&wire[..cut]);
        let first = decoder.decode_command(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let command = match first {
            Some(c) => c,
            None => {
                buf.extend_from_slice(&wire[cut..]);
                decoder.decode_command(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?.expect("complete")
            }
        };
        prop_assert_eq!(command.args().map(<[u8]>::to_vec).collect::<Vec<_>>(), args.clone());
        let Ok(Status::Complete((borrowed, used))) = decoder.decode_command_slice(&wire) else {
            return Err(TestCaseError::fail("borrowed path"));
        };
        prop_assert_eq!(used, wire.len() - 14);
        prop_assert_eq!(borrowed.args().map(<[u8]>::to_vec).collect::<Vec<_>>(), args);
        if buf.len() < 14 {
            buf.extend_from_slice(&wire[wire.len() - (14 - buf.len())..]);
        }
        let ping = decoder.decode_command(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(ping.and_then(|p| p.arg(0).map(<[u8]>::to_vec)), Some(b"PING".to_vec()));
    }

    #[test]
    fn garbage_never_panics(input in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&input);
        let mut decoder = Decoder::new();
        let _ = decoder.decode_span(&input);
        let mut buf = BytesMut::from(&input[..]);
        while let Ok(Some(_)) = decoder.decode_command(&mut buf) {}
        let mut rest = &input[..];
        while let Ok(Status::Complete((_, used))) = decoder.decode_command_slice(rest) {
            rest = &rest[used..];
        }
    }
}

mod server_limits {
    use proptest::prelude::*;
    use redis_resp::server_limits::{OutputLimit, OutputLimits, parse_memory};

    fn limit() -> impl Strategy<Value = OutputLimit> {
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(hard, soft, soft_seconds)| {
            OutputLimit {
                hard,
                soft,
                soft_seconds,
            }
        })
    }

    proptest! {
        /// What CONFIG GET writes, CONFIG SET reads back to the same limits, whatever they
        /// were before.
        #[test]
        fn written_limits_read_back_the_same(
            normal in limit(), replica in limit(), pubsub in limit(), before in limit()
        ) {
            let limits = OutputLimits { normal, replica, pubsub };
            let mut read = OutputLimits { normal: before, replica: before, pubsub: before };
            read.apply(&limits.to_string()).expect("its own writing");
            prop_assert_eq!(read, limits);
        }

        /// Any text: an answer, never a panic; a refused value changes nothing; a number
        /// with a unit is that many bytes unless it overflows.
        #[test]
        fn any_value_is_taken_whole_or_refused(text in "[ a-zA-Z0-9+-]{0,40}", n in any::<u32>()) {
            let mut limits = OutputLimits::DEFAULT;
            if limits.apply(&text).is_err() {
                prop_assert_eq!(limits, OutputLimits::DEFAULT);
            }
            let _ = parse_memory(&text);
            prop_assert_eq!(parse_memory(&format!("{n}kB")), Some(u64::from(n) * 1024));
            prop_assert_eq!(parse_memory(&format!("{n}M")), Some(u64::from(n) * 1_000_000));
        }
    }
}
