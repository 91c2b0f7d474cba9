//! Transactions: MULTI queues in the engine, EXEC sends MULTI, the commands and EXEC in one
//! write to the node of their one slot (one write on one connection: nothing of another
//! client can come between), and WATCH pins a connection of the client's own to the watched
//! keys' node until EXEC, DISCARD or UNWATCH.

use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{ClusterError, Redirect, Route};
use redis_hash_slot::Slot;
use redis_resp::{Frame, errors};

use crate::conn::Expect;
use crate::engine::{Engine, Name, masters};
use crate::request::{Call, CallKey, CallState, Target};
use crate::{ClientId, ConnId, RequestId, error_frame};

/// A client inside MULTI.
#[derive(Debug, Default)]
pub(crate) struct Multi {
    commands: Vec<Vec<Bytes>>,
    /// A command was refused when queued: EXEC answers EXECABORT.
    dirty: bool,
}

/// A client after WATCH.
#[derive(Debug)]
pub(crate) struct Watch {
    /// Its connection; `None` once lost (the next EXEC fails as a touched WATCH does).
    pub(crate) conn: Option<ConnId>,
    /// The watched keys' slot.
    slot: Option<Slot>,
}

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
const WATCH_LOST: &str = "ERR the connection holding the WATCH was lost";

fn ok() -> Frame {
    Frame::SimpleString(Bytes::from_static(b"OK"))
}

impl Engine {
    /// A client's transaction commands, answered or sent here; any other command comes back
    /// to be routed (queued instead inside MULTI).
    pub(crate) fn session(
        &mut self,
        now: Instant,
        id: RequestId,
        client: ClientId,
        name: &Name,
        argv: Vec<Bytes>,
    ) -> Option<Vec<Bytes>> {
        let table = self.table;
        let state = self.clients.get_mut(&client)?;
        let reply = match (name.as_bytes(), state.multi.as_mut()) {
            (b"multi", Some(_)) => error_frame("ERR MULTI calls can not be nested"),
            (b"multi", None) => {
                state.multi = Some(Multi::default());
                ok()
            }
            (b"exec", None) => error_frame("ERR EXEC without MULTI"),
            (b"discard", None) => error_frame("ERR DISCARD without MULTI"),
            (b"watch", Some(_)) => error_frame("ERR WATCH inside MULTI is not allowed"),
            (b"exec", Some(_)) => {
                let multi = state.multi.take().unwrap_or_default();
                if multi.dirty {
                    self.unwatch(now, client);
                    error_frame(EXECABORT)
                } else {
                    self.exec(now, id, client, multi.commands);
                    return None;
                }
            }
            (b"discard", Some(_)) => {
                state.multi = None;
                self.unwatch(now, client);
                ok()
            }
            (b"watch", None) => {
                self.watch(now, id, client, argv);
                return None;
            }
            (b"unwatch", None) => {
                self.unwatch(now, client);
                ok()
            }
            (_, Some(multi)) => match table.check(&argv) {
                // What the server refuses before running: answered now, and EXEC fails.
                Err(rejection) => {
                    multi.dirty = true;
                    Frame::SimpleError(Bytes::from(rejection.error_line(&argv)))
                }
                Ok(_) => {
                    multi.commands.push(argv);
                    Frame::SimpleString(Bytes::from_static(b"QUEUED"))
                }
            },
            (_, None) => return Some(argv),
        };
        self.finish(id, reply);
        None
    }

    /// The one slot of a transaction's commands (`None` when none has a key), or the error
    /// the client gets instead. With masters the caller names, which check no slots, the
    /// keys need only be on one master: the slot is then the first key's.
    fn transaction_slot(&self, commands: &[Vec<Bytes>]) -> Result<Option<Slot>, Frame> {
        let mut slot: Option<Slot> = None;
        for argv in commands {
            let here = match self.table.route(argv) {
                Ok(Route::Slot(s)) => s,
                Ok(Route::Any) | Err(_) => continue,
                Ok(Route::CrossSlot | Route::Split(_)) => match self.one_server_slot(argv) {
                    Some(s) => s,
                    None => return Err(error_frame(errors::CROSSSLOT)),
                },
                Ok(Route::AllShards(_) | Route::AllNodes(_) | Route::Special) => {
                    return Err(error_frame(
                        "ERR a command for every node cannot run inside a cluster transaction",
                    ));
                }
            };
            match slot {
                None => slot = Some(here),
                Some(known) if self.same_server(known, here) => {}
                Some(_) => return Err(error_frame(errors::CROSSSLOT)),
            }
        }
        Ok(slot)
    }

    /// EXEC: the transaction, as one call to the node of its slot (or on the WATCH
    /// connection).
    fn exec(&mut self, now: Instant, id: RequestId, client: ClientId, commands: Vec<Vec<Bytes>>) {
        let slot = match self.transaction_slot(&commands) {
            Ok(slot) => slot,
            Err(frame) => {
                self.unwatch(now, client);
                return self.finish(id, frame);
            }
        };
        let pinned = match self.watch_of(client) {
            Some((_, Some(watched))) if slot.is_some_and(|s| !self.same_server(s, watched)) => {
                self.unwatch(now, client);
                return self.finish(id, error_frame(errors::CROSSSLOT));
            }
            // The WATCH cannot hold any more: the transaction fails as a touched one does.
            Some((None, _)) => {
                self.unwatch(now, client);
                let proto = self.clients.get(&client).map_or(2, |s| s.proto);
                let null = if proto == 3 {
                    Frame::Null
                } else {
                    Frame::NullArray
                };
                return self.finish(id, null);
            }
            Some((Some(conn), _)) => Some(conn),
            None => None,
        };
        let target = match slot {
            Some(slot) => Target::Slot { slot, read: false },
            None => Target::Any,
        };
        let mut call = Call::new(vec![Bytes::from_static(b"EXEC")], target);
        call.barrier = true;
        let rare = call.rare_mut();
        rare.batch = Some(commands);
        rare.pinned = pinned;
        self.start(now, id, call);
    }

    /// WATCH: on the client's pinned connection, opened to the keys' node the first time.
    fn watch(&mut self, now: Instant, id: RequestId, client: ClientId, argv: Vec<Bytes>) {
        let slot = match self.table.route(&argv) {
            Ok(Route::Slot(slot)) => Some(slot),
            Ok(Route::CrossSlot | Route::Split(_)) => match self.one_server_slot(&argv) {
                Some(slot) => Some(slot),
                None => return self.finish(id, error_frame(errors::CROSSSLOT)),
            },
            // A wrong arity: the server's own error, from the node.
            _ => None,
        };
        let proto = self.clients.get(&client).map_or(2, |s| s.proto);
        let conn = match self.watch_of(client) {
            Some((_, Some(watched))) if slot.is_some_and(|s| !self.same_server(s, watched)) => {
                return self.finish(id, error_frame(errors::CROSSSLOT));
            }
            Some((conn, watched)) => {
                if let (None, Some(watch)) = (
                    watched,
                    self.clients.get_mut(&client).and_then(|s| s.watch.as_mut()),
                ) {
                    watch.slot = slot;
                }
                conn
            }
            None => {
                let addr = match (slot, self.map.as_ref()) {
                    (Some(slot), Some(map)) => map.master(slot).map(ToString::to_string),
                    (None, Some(map)) => masters(map).into_iter().next(),
                    _ => None,
                };
                let Some(addr) = addr else {
                    return self.finish(id, error_frame(errors::CLUSTERDOWN_UNBOUND));
                };
                let conn = self.open(now, &addr, proto, false);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.pinned = true;
                }
                if let Some(state) = self.clients.get_mut(&client) {
                    state.watch = Some(Watch {
                        conn: Some(conn),
                        slot,
                    });
                }
                Some(conn)
            }
        };
        let Some(conn) = conn else {
            return self.finish(id, error_frame(WATCH_LOST));
        };
        let target = match slot {
            Some(slot) => Target::Slot { slot, read: false },
            None => Target::Any,
        };
        let mut call = Call::new(argv, target);
        call.rare_mut().pinned = Some(conn);
        call.barrier = true;
        self.start(now, id, call);
    }

    /// The client's WATCH: its connection (`None` once lost) and the watched slot.
    fn watch_of(&self, client: ClientId) -> Option<(Option<ConnId>, Option<Slot>)> {
        let watch = self.clients.get(&client)?.watch.as_ref()?;
        Some((watch.conn, watch.slot))
    }

    /// Routes a request made of one call.
    fn start(&mut self, now: Instant, id: RequestId, call: Call) {
        if let Some(request) = self.requests.get_mut(&id) {
            request.calls = vec![call];
        }
        self.enqueue((id, 0));
        self.dispatch(now, (id, 0));
    }

    /// Forgets the client's WATCH: its connection is closed (the server forgets the keys),
    /// once it has answered what is in flight on it (a pipelined WATCH still owes its OK).
    fn unwatch(&mut self, now: Instant, client: ClientId) {
        let watch = self.clients.get_mut(&client).and_then(|s| s.watch.take());
        let Some(conn) = watch.and_then(|w| w.conn) else {
            return;
        };
        match self.conns.get_mut(&conn) {
            Some(c) if !c.owed.is_empty() => {
                // Closed after its last reply, as a blocking command's connection is.
                c.pinned = false;
                c.dedicated = true;
            }
            _ => self.close(now, conn),
        }
    }

    /// A pinned connection is gone: its client's WATCH no longer holds.
    pub(crate) fn watch_lost(&mut self, conn: ConnId) {
        for state in self.clients.values_mut() {
            if let Some(watch) = state.watch.as_mut().filter(|w| w.conn == Some(conn)) {
                watch.conn = None;
            }
        }
    }

    /// Writes a call on the client's WATCH connection.
    pub(crate) fn send_pinned(&mut self, now: Instant, key: CallKey, conn: ConnId) {
        let Some(call) = self.call_ref(key) else {
            return;
        };
        let (argv, batch) = (call.argv.clone(), call.batch().cloned());
        let Some(c) = self.conns.get_mut(&conn) else {
            return self.complete(now, key, error_frame(WATCH_LOST));
        };
        if let Some(batch) = &batch {
            c.write(&[&b"MULTI"[..]], Expect::Queued(key), now);
            for command in batch {
                c.write(command, Expect::Queued(key), now);
            }
        }
        c.write(&argv, Expect::Call(key), now);
        self.mark_writable(conn);
        if let Some(call) = self.call_mut(key) {
            call.attempts += 1;
            call.state = CallState::Sent(conn);
        }
    }

    /// What a reply means for a transaction's call: `None` when handled here, else the frame
    /// to treat as the call's reply (a queued command's MOVED stands for the EXECABORT that
    /// followed it: the transaction did not run, and goes again where the slot is).
    pub(crate) fn transaction_reply(
        &mut self,
        now: Instant,
        key: CallKey,
        frame: Frame,
    ) -> Option<Frame> {
        let call = self.call_mut(key)?;
        // Neither on a WATCH connection nor a transaction: the usual case, nothing to do.
        let Some(rare) = call.rare.as_deref_mut() else {
            return Some(frame);
        };
        if let Some(conn) = rare.pinned {
            // On the WATCH connection nothing is followed: the watch is on that node.
            let exec = rare.batch.is_some();
            let client = self.requests.get(&key.0).map(|r| r.client);
            self.complete(now, key, frame);
            if let (true, Some(client)) = (exec, client) {
                if self
                    .clients
                    .get(&client)
                    .and_then(|s| s.watch.as_ref())
                    .is_some_and(|w| w.conn == Some(conn))
                {
                    self.unwatch(now, client);
                }
            }
            return None;
        }
        if rare.batch.is_none() {
            return Some(frame);
        }
        let Some(queued) = rare.queued_error.take() else {
            return Some(frame);
        };
        let text = queued.as_bytes().unwrap_or_default().to_vec();
        match ClusterError::parse(&text) {
            // ASKING cannot reach queued commands: wait for the migration to end.
            ClusterError::Redirect(Redirect::Ask { .. }) => {
                self.retry(now, key, queued);
                if let (Some(slot), Some(client)) = (
                    self.call_ref(key).and_then(Call::slot),
                    self.requests.get(&key.0).map(|r| r.client),
                ) {
                    self.pump(now, client, slot);
                }
                None
            }
            ClusterError::Redirect(_)
            | ClusterError::TryAgain
            | ClusterError::ClusterDown(_)
            | ClusterError::Loading
            | ClusterError::MasterDown => Some(queued),
            _ => Some(frame),
        }
    }
}
