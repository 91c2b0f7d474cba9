//! Sentinel replies in both protocols, and replies that are not what the command gives.
//! The live counterpart is the workspace's `tests/sentinel_interop.rs`.

use redis_cluster_route::sentinel::{self, Address, Role};
use redis_resp::Frame;

fn bulk(s: &str) -> Frame<&[u8]> {
    Frame::BulkString(s.as_bytes())
}

#[test]
fn resp3_forms_parse_like_resp2() {
    let fields = [
        ("name", "127.0.0.1:6380"),
        ("ip", "127.0.0.1"),
        ("port", "6380"),
        ("flags", "slave,s_down"),
        ("master-link-status", "err"),
    ];
    let map = Frame::Map(fields.iter().map(|(k, v)| (bulk(k), bulk(v))).collect());
    let flat = Frame::Array(
        fields
            .iter()
            .flat_map(|(k, v)| [bulk(k), bulk(v)])
            .collect(),
    );
    for entry in [map, flat] {
        let replicas = sentinel::replicas(&Frame::Array(vec![entry])).expect("parses");
        assert_eq!(replicas[0].address.port, 6380);
        assert_eq!(replicas[0].flags, ["slave", "s_down"]);
        assert!(!replicas[0].is_healthy());
    }
    let payload = "mymaster 127.0.0.1 6379 127.0.0.1 6380";
    let push = Frame::Push(vec![bulk("message"), bulk("+switch-master"), bulk(payload)]);
    let event = sentinel::switch_master(&push).expect("an event");
    assert_eq!(
        event.new,
        Address {
            host: "127.0.0.1".into(),
            port: 6380
        }
    );
    let other = Frame::Push(vec![bulk("message"), bulk("+sdown"), bulk(payload)]);
    assert_eq!(sentinel::switch_master(&other), None);
}

#[test]
fn other_shapes_are_errors_not_panics() {
    assert!(sentinel::master_addr(&Frame::Array(vec![bulk("h")])).is_err());
    assert!(sentinel::master_addr(&Frame::Array(vec![bulk("h"), bulk("99999")])).is_err());
    assert_eq!(sentinel::master_addr(&Frame::<&[u8]>::Null), Ok(None));
    assert!(sentinel::role(&Frame::Array(vec![bulk("master")])).is_err());
    assert!(sentinel::role(&Frame::<&[u8]>::Integer(1)).is_err());
    let replica = Frame::Array(vec![
        bulk("slave"),
        bulk("10.0.0.1"),
        Frame::Integer(6379),
        bulk("connected"),
        Frame::Integer(42),
    ]);
    assert!(matches!(
        sentinel::role(&replica),
        Ok(Role::Replica { offset: 42, .. })
    ));
    assert_eq!(sentinel::switch_master(&bulk("mymaster 1.2.3.4")), None);
}
