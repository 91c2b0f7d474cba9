"""redis-py (8.x, RESP3 by default) through the proxy at 127.0.0.1:PORT, in front of a cluster.

Run by tests/redis_py.rs; prints "ok" when every check holds, else fails with a traceback.
"""

import sys

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)

# RESP3 was negotiated: HELLO 3 at connect, replies in RESP3 types.
conn = r.connection_pool.get_connection()
assert int(conn.protocol) == 3, conn.protocol
r.connection_pool.release(conn)

assert r.set("foo", "bar") is True
assert r.get("foo") == b"bar"
assert r.mset({"a": "1", "b": "2", "c": "3"}) is True
assert r.mget("a", "b", "nope", "c") == [b"1", b"2", None, b"3"]
assert r.delete("a", "b", "nope") == 2

# RESP3 maps: a hash comes back as a map.
r.hset("h", mapping={"f": "v", "g": "w"})
assert r.hgetall("h") == {b"f": b"v", b"g": b"w"}

pipe = r.pipeline(transaction=False)
for i in range(200):
    pipe.set(f"k{i}", i)
for i in range(200):
    pipe.get(f"k{i}")
replies = pipe.execute()
assert replies[:200] == [True] * 200, replies[:5]
assert replies[200:] == [str(i).encode() for i in range(200)], replies[200:205]

# A transaction on one slot.
tx = r.pipeline(transaction=True)
tx.set("{t}x", 1)
tx.incr("{t}x")
tx.get("{t}x")
assert tx.execute() == [True, 2, b"2"]


def next_message(pubsub, kind):
    for _ in range(50):
        message = pubsub.get_message(timeout=0.2)
        if message is not None and message["type"] == kind:
            return message
    raise AssertionError(f"no {kind} message")


ps = r.pubsub()
ps.subscribe("news")
assert next_message(ps, "subscribe")["channel"] == b"news"
# PUBLISH counts the receivers of the node it reached; the cluster bus carries the message
# to the subscriber's node.
r.publish("news", "hello")
assert next_message(ps, "message")["data"] == b"hello"
ps.close()

sp = r.pubsub()
sp.ssubscribe("{s}ch")
assert next_message(sp, "ssubscribe")["channel"] == b"{s}ch"
assert r.spublish("{s}ch", "hi") == 1
assert next_message(sp, "smessage")["data"] == b"hi"
sp.close()

print("ok")
