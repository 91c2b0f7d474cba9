"""redis-py 8 (RESP3 by default) cluster Pub/Sub and sharded Pub/Sub against a cluster whose
nodes listen on 127.0.0.1 at the ports given: a subscriber on every node gets a message
published on another; sharded subscribers get SPUBLISH's message through RedisCluster's own
sharded pub/sub.

Run by tests/toy_node.rs against toy nodes and against real servers; prints "ok" when every
check holds, else fails with a traceback.
"""

import sys

import redis
from redis.cluster import ClusterNode, RedisCluster

ports = [int(p) for p in sys.argv[1:]]


def next_message(pubsub, kind, sharded=False):
    for _ in range(50):
        if sharded:
            message = pubsub.get_sharded_message(timeout=0.2)
        else:
            message = pubsub.get_message(timeout=0.2)
        if message is not None and message["type"] == kind:
            return message
    raise AssertionError(f"no {kind} message")


rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[0])], socket_timeout=10)
conn = rc.get_default_node().redis_connection.connection_pool.get_connection()
assert int(conn.protocol) == 3, conn.protocol

# A subscriber on every node, each through a plain connection to it.
subscribers = []
for port in ports:
    ps = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10).pubsub()
    ps.subscribe("news")
    assert next_message(ps, "subscribe")["channel"] == b"news"
    subscribers.append(ps)

# RedisCluster's PUBLISH goes to one node; the bus carries it to all.
rc.publish("news", "hello")
for ps in subscribers:
    assert next_message(ps, "message")["data"] == b"hello"
    ps.close()

# RedisCluster's own pub/sub.
cps = rc.pubsub()
cps.subscribe("weather")
assert next_message(cps, "subscribe")["channel"] == b"weather"
rc.publish("weather", "rain")
assert next_message(cps, "message")["data"] == b"rain"
cps.close()

# Sharded: the client finds the channel's node itself.
sps = rc.pubsub()
sps.ssubscribe("{s}ch")
assert next_message(sps, "ssubscribe", sharded=True)["channel"] == b"{s}ch"
assert rc.spublish("{s}ch", "hi") == 1
assert next_message(sps, "smessage", sharded=True)["data"] == b"hi"
sps.close()

print("ok")
