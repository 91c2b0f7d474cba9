//! Receiving: what each reply means (a redirect, a retry, a call's final reply), how calls
//! become a request's reply, and replies going out in each client's order.

use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{ClusterError, CommandTable, Endpoint, Redirect};
use redis_hash_slot::Slot;
use redis_resp::{Frame, encoded_len};

use crate::conn::Expect;
use crate::engine::{Engine, endpoint, redirect_endpoint};
use crate::hello;
use crate::request::{Call, CallKey, CallState, Combine, Reply, Target, scan_step};
use crate::{ClientId, ConnId, Event, Output, RequestId};

/// A finished request's reply (or its silent end) goes out, counted when `counting`.
fn hand_out(
    outputs: &mut std::collections::VecDeque<Output>,
    unwritten: &mut usize,
    counting: bool,
    client: ClientId,
    request: RequestId,
    reply: Option<Reply>,
    silent: bool,
) {
    match (reply, silent) {
        (Some(Reply::Frame(frame)), false) => {
            if counting {
                *unwritten += encoded_len(&frame);
            }
            outputs.push_back(Output::Reply {
                client,
                request,
                frame,
            });
        }
        (Some(Reply::Raw(bytes)), false) => {
            if counting {
                *unwritten += bytes.len();
            }
            outputs.push_back(Output::Raw {
                client,
                request,
                bytes,
            });
        }
        _ => outputs.push_back(Output::Answered { client, request }),
    }
}

impl Engine {
    /// What a reply on `conn` answers.
    pub(crate) fn answer(&mut self, now: Instant, conn: ConnId, expect: Expect, frame: Frame) {
        match expect {
            Expect::Call(key) | Expect::Whole(key) => self.answer_call(now, conn, key, frame),
            Expect::Piece(key) => self.scan_piece(conn, key, frame),
            Expect::Visit(key) => self.scan_visited(now, conn, key, frame),
            Expect::Queued(key) => {
                if let Some(call) = self.call_mut(key) {
                    if frame.is_error() {
                        let rare = call.rare_mut();
                        if rare.queued_error.is_none() {
                            rare.queued_error = Some(frame);
                        }
                    }
                }
            }
            Expect::Setup => {
                if let Frame::SimpleError(text) | Frame::BulkError(text) = &frame {
                    let addr = self
                        .conns
                        .get(&conn)
                        .map(|c| c.addr.clone())
                        .unwrap_or_default();
                    self.push_event(Event::SetupRefused {
                        endpoint: endpoint(&addr),
                        error: String::from_utf8_lossy(text).into_owned(),
                    });
                }
            }
            Expect::Refresh { shards } => self.answer_refresh(now, conn, shards, frame),
            Expect::Epoch => self.answer_epoch(conn, &frame),
            Expect::Info => self.answer_info(frame),
        }
    }

    pub(crate) fn answer_call(&mut self, now: Instant, conn: ConnId, key: CallKey, frame: Frame) {
        let Some(frame) = self.transaction_reply(now, key, frame) else {
            return;
        };
        let text = match &frame {
            Frame::SimpleError(text) => text.clone(),
            _ => return self.complete(now, key, frame),
        };
        let host = self
            .conns
            .get(&conn)
            .map(|c| c.host.clone())
            .unwrap_or_default();
        let max = self.config.max_attempts;
        let attempts_left = self.call_mut(key).is_some_and(|c| c.attempts < max);
        match ClusterError::parse(&text) {
            ClusterError::Redirect(redirect) if attempts_left => {
                let (slot, to_host, port, moved) = match redirect {
                    Redirect::Moved { slot, host, port } => (slot, host, port, true),
                    Redirect::Ask { slot, host, port } => (slot, host, port, false),
                };
                let to = redirect_endpoint(to_host, port, &host);
                let addr = to.to_string();
                if moved {
                    self.counters.moved += 1;
                    self.moved(now, slot, to);
                } else {
                    self.counters.asked += 1;
                }
                self.unclear(key);
                let Some(call) = self.call_mut(key) else {
                    return;
                };
                call.state = CallState::Queued;
                if !moved {
                    call.rare_mut().asking = Some(addr);
                }
                self.dispatch(now, key);
            }
            // READONLY: a standalone master was demoted (a Sentinel failover); the driver
            // names the new one with `set_slot_map`.
            ClusterError::TryAgain
            | ClusterError::Loading
            | ClusterError::MasterDown
            | ClusterError::ReadOnly
            | ClusterError::ClusterDown(_) => {
                if matches!(ClusterError::parse(&text), ClusterError::ClusterDown(_)) {
                    self.refresh.want(now);
                    self.drive_refresh(now);
                }
                self.retry(now, key, frame);
                let slot = self.call_mut(key).and_then(|c| c.slot());
                let client = self.requests.get(&key.0).map(|r| r.client);
                if let (Some(slot), Some(client)) = (slot, client) {
                    self.pump(now, client, slot);
                }
            }
            _ => self.complete(now, key, frame),
        }
    }

    /// A MOVED: the slot is the named node's from now on, and the map is reloaded soon.
    pub(crate) fn moved(&mut self, now: Instant, slot: Slot, to: Endpoint) {
        self.refresh.moved(slot, to.clone());
        if let Some(map) = &mut self.map {
            map.assign(slot, to);
        }
        self.map_changed();
        self.refresh.want(now);
        self.drive_refresh(now);
    }

    /// A call has its final reply.
    pub(crate) fn complete(&mut self, now: Instant, key: CallKey, frame: Frame) {
        self.complete_reply(now, key, Reply::Frame(frame));
    }

    /// [`Engine::complete`], the reply a frame, or bytes for a part of a split read
    /// ([`Pass::Part`]).
    ///
    /// [`Pass::Part`]: crate::request::Pass::Part
    pub(crate) fn complete_reply(&mut self, now: Instant, key: CallKey, reply: Reply) {
        let Some(request) = self.requests.get_mut(&key.0) else {
            return;
        };
        let client = request.client;
        if let Combine::Scan { masters, node } = &mut request.combine {
            match scan_step(reply.into_frame(), *node, masters.len()) {
                Ok(reply) => {
                    if let Some(call) = request.calls.get_mut(key.1) {
                        call.reply = Some(Reply::Frame(reply));
                        call.state = CallState::Done;
                    }
                }
                Err(next) => {
                    *node = next;
                    let addr = masters[next].clone();
                    if let Some(call) = request.calls.get_mut(key.1) {
                        call.argv[1] = Bytes::from_static(b"0");
                        call.target = Target::Node(addr);
                        call.state = CallState::Queued;
                        call.attempts = 0;
                    }
                    self.send(now, key);
                    return;
                }
            }
        } else if let Some(call) = request.calls.get_mut(key.1) {
            call.reply = Some(reply);
            call.state = CallState::Done;
        }
        let slot = request.calls.get(key.1).and_then(Call::slot);
        let merged = if matches!(request.combine, Combine::SlotScan(_)) {
            let frame = request
                .calls
                .get_mut(key.1)
                .and_then(|c| c.reply.take())
                .map_or_else(|| crate::error_frame("ERR no reply"), Reply::into_frame);
            self.scan_complete(key, frame).map(Reply::Frame)
        } else {
            request.combined()
        };
        self.call_done(now, key, client, slot);
        if let Some(reply) = merged {
            self.finish_reply(key.0, reply);
        }
    }

    /// A reply handed on as the node sent it ([`Config::raw_replies`]): the request's whole
    /// reply, as the caller checked ([`Request::passes_on`] with the reply).
    ///
    /// [`Config::raw_replies`]: crate::Config::raw_replies
    /// [`Request::passes_on`]: crate::request::Request::passes_on
    pub(crate) fn complete_raw(&mut self, now: Instant, key: CallKey, bytes: Bytes) {
        let Some(request) = self.requests.get_mut(&key.0) else {
            return;
        };
        let client = request.client;
        let slot = request.calls.first_mut().and_then(|call| {
            call.state = CallState::Done;
            call.slot()
        });
        self.call_done(now, key, client, slot);
        self.finish_reply(key.0, Reply::Raw(bytes));
    }

    /// Call `key` of `client`, of `slot`, has its reply: it leaves its slot's queue, and
    /// the next call there may now be free to go.
    fn call_done(&mut self, now: Instant, key: CallKey, client: ClientId, slot: Option<Slot>) {
        let Some(slot) = slot else {
            return;
        };
        // Whether calls of the slot are still queued (usually not: a pipeline on random
        // keys meets a slot once).
        let mut queued = false;
        if let Some(state) = self.clients.get_mut(&client) {
            let raw = u16::from(slot);
            if let Some(queue) = state.slots.get_mut(&raw) {
                // Usually the oldest: answers come in order.
                if let Some(at) = queue.keys.remove(key) {
                    if at < queue.clear {
                        queue.clear -= 1;
                    }
                }
                if queue.keys.is_empty() {
                    state.slots.remove(&raw);
                } else {
                    queued = true;
                }
            }
        }
        if queued {
            self.pump(now, client, slot);
        }
    }

    /// A request has its reply: it goes out when every earlier one of its client has.
    pub(crate) fn finish(&mut self, id: RequestId, reply: Frame) {
        self.finish_reply(id, Reply::Frame(reply));
    }

    /// [`Engine::finish`], the reply a frame or bytes.
    pub(crate) fn finish_reply(&mut self, id: RequestId, reply: Reply) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let client = request.client;
        let Some(state) = self.clients.get_mut(&client) else {
            // Its client is gone: nobody reads the reply.
            self.requests.discard(&id);
            return;
        };
        if state.order.front() != Some(&id) {
            // An earlier request is owed its reply: this one waits, and nothing else is
            // ready (each was handed out when it became ready at the front).
            request.reply = Some(reply);
            return;
        }
        // Usually the case: replies come in order. Handed out at once, without a stop in the
        // request's own entry.
        let silent = request.silent;
        state.order.pop_front();
        self.requests.discard(&id);
        let counting = self.config.client_output_limit.is_some();
        let out = &mut self.outputs;
        hand_out(
            out,
            &mut state.unwritten,
            counting,
            client,
            id,
            Some(reply),
            silent,
        );
        while let Some(front) = state.order.front().copied() {
            let Some(request) = self.requests.get_mut(&front) else {
                break;
            };
            let Some(reply) = request.reply.take() else {
                break;
            };
            let silent = request.silent;
            state.order.pop_front();
            self.requests.discard(&front);
            hand_out(
                out,
                &mut state.unwritten,
                counting,
                client,
                front,
                Some(reply),
                silent,
            );
        }
        if state.order.is_empty() {
            for frame in std::mem::take(&mut state.subs.held) {
                if counting {
                    state.unwritten += encoded_len(&frame);
                }
                self.outputs.push_back(Output::Push { client, frame });
            }
        }
        // `check_output_limit`, with the client at hand.
        if let Some(limit) = self.config.client_output_limit {
            if !state.paused && state.unwritten > limit {
                state.paused = true;
                self.outputs.push_back(Output::Pause { client });
            }
        }
    }

    /// With [`Config::client_output_limit`](crate::Config): a client owed more than the limit
    /// of replies handed out and not written is paused ([`Output::Pause`]).
    pub(crate) fn check_output_limit(&mut self, client: ClientId) {
        let Some(limit) = self.config.client_output_limit else {
            return;
        };
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        if !state.paused && state.unwritten > limit {
            state.paused = true;
            self.outputs.push_back(Output::Pause { client });
        }
    }

    /// A request whose replies come as pushes (SUBSCRIBE and the like): done, with no reply.
    pub(crate) fn finish_silently(&mut self, id: RequestId) {
        if let Some(request) = self.requests.get_mut(&id) {
            request.silent = true;
        }
        self.finish(id, Frame::Null);
    }

    pub(crate) fn push_output(&mut self, output: Output) {
        self.outputs.push_back(output);
    }

    /// A slot map arrived: requests that waited for one are routed, and calls of slots the
    /// map did not serve are sent again.
    pub(crate) fn map_installed(&mut self, now: Instant) {
        for id in std::mem::take(&mut self.unrouted) {
            self.route(now, id);
        }
    }

    /// Requests that waited for a first map get `error`.
    pub(crate) fn fail_unrouted(&mut self, error: &Frame) {
        for id in std::mem::take(&mut self.unrouted) {
            if let Some(request) = self.requests.get_mut(&id) {
                request.unrouted = None;
            }
            self.finish(id, error.clone());
        }
    }

    /// Chooses the command table from `INFO server`.
    pub(crate) fn answer_info(&mut self, frame: Frame) {
        let Some(text) = frame.as_bytes() else {
            return;
        };
        self.server = hello::Server::from_info(text);
        if self.config.fixed_table {
            return;
        }
        let table = CommandTable::for_server(&self.server.name, &self.server.version);
        self.table = table;
        self.push_event(Event::ServerIdentified {
            name: self.server.name.clone(),
            version: self.server.version.clone(),
            table: table.server,
        });
    }

    pub(crate) fn push_event(&mut self, event: Event) {
        self.outputs.push_back(Output::Event(Box::new(event)));
    }

    pub(crate) fn mark_writable(&mut self, conn: ConnId) {
        if self.conns.get(&conn).is_some_and(|c| c.open) {
            self.writable.push_back(conn);
        }
    }
}
