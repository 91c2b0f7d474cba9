//! A blocking Redis Cluster client on `std::net`, with no async runtime: the second driver of
//! `redis-cluster-client`'s engine (the proxy is the first). It shows what a driver is: sockets,
//! one reader thread per connection, a clock, and nothing of the protocol.
//!
//! ```text
//! cargo run --example cluster-client -- 127.0.0.1:7000 SET foo bar
//! cargo run --example cluster-client -- 127.0.0.1:7000 < commands.txt   # one per line
//! ```
//!
//! Each reply is printed on one line: strings as they are, `(nil)`, integers, `(error) …`,
//! arrays as `[a, b, …]`.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redis_cluster_proto::client::{ClientId, Config, ConnId, Engine, Event, Output, RequestId};
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::Endpoint;

const USAGE: &str = "usage: cluster-client HOST:PORT [COMMAND ARG...]
  With a command: runs it and prints its reply.
  Without: runs one command per line of standard input (arguments split on spaces).
  -v before HOST:PORT prints the engine's events on standard error.";

/// What a reader thread reports.
enum FromNode {
    Data(ConnId, Vec<u8>),
    Closed(ConnId, String),
}

/// The client: the engine, its sockets, and the replies not yet asked for.
struct Client {
    engine: Engine,
    me: ClientId,
    sockets: HashMap<ConnId, TcpStream>,
    /// Replies by request (`None`: a request answered by pushes, SUBSCRIBE).
    replies: HashMap<RequestId, Option<Frame>>,
    /// Pub/Sub messages and confirmations, in arrival order.
    pushes: Vec<Frame>,
    tx: Sender<FromNode>,
    rx: Receiver<FromNode>,
    verbose: bool,
}

impl Client {
    fn new(seed: Endpoint, verbose: bool) -> Self {
        let mut engine = Engine::new(Config::new(vec![seed]), Instant::now());
        let me = engine.open_client();
        let (tx, rx) = channel();
        Self {
            engine,
            me,
            sockets: HashMap::new(),
            replies: HashMap::new(),
            pushes: Vec::new(),
            tx,
            rx,
            verbose,
        }
    }

    /// Runs one command and waits for its reply (`None` for one answered by pushes).
    fn call(&mut self, argv: Vec<Bytes>) -> Option<Frame> {
        let id = self.engine.handle_request(Instant::now(), self.me, argv);
        loop {
            self.drive();
            if let Some(frame) = self.replies.remove(&id) {
                return frame;
            }
            self.wait();
        }
    }

    /// Does what the engine asks until it asks nothing more.
    fn drive(&mut self) {
        let mut buf = Vec::new();
        loop {
            let mut busy = false;
            while let Some(output) = self.engine.poll_output() {
                busy = true;
                self.output(output);
            }
            while let Some(conn) = self.engine.poll_transmit(&mut buf) {
                busy = true;
                let written = match self.sockets.get_mut(&conn) {
                    Some(socket) => socket.write_all(&buf).map_err(|e| e.to_string()),
                    None => Err("not connected".to_string()),
                };
                buf.clear();
                if let Err(reason) = written {
                    self.forget(conn);
                    self.engine.handle_closed(Instant::now(), conn, &reason);
                }
            }
            if !busy {
                return;
            }
        }
    }

    fn output(&mut self, output: Output) {
        match output {
            Output::Connect { conn, endpoint } => match connect(&endpoint) {
                Ok(socket) => {
                    self.read_in_background(conn, &socket);
                    self.sockets.insert(conn, socket);
                    self.engine.handle_connected(Instant::now(), conn);
                }
                Err(reason) => self.engine.handle_closed(Instant::now(), conn, &reason),
            },
            Output::Close { conn } => self.forget(conn),
            Output::Reply { request, frame, .. } => {
                self.replies.insert(request, Some(frame));
            }
            Output::Answered { request, .. } => {
                self.replies.insert(request, None);
            }
            Output::Push { frame, .. } => self.pushes.push(frame),
            Output::Event(event) if self.verbose => eprintln!("{}", describe(&event)),
            _ => {}
        }
    }

    fn forget(&mut self, conn: ConnId) {
        if let Some(socket) = self.sockets.remove(&conn) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// A thread that reads `socket` and reports what it reads.
    fn read_in_background(&self, conn: ConnId, socket: &TcpStream) {
        let Ok(mut socket) = socket.try_clone() else {
            let _ = self
                .tx
                .send(FromNode::Closed(conn, "cannot clone the socket".into()));
            return;
        };
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0; 64 * 1024];
            loop {
                match socket.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(FromNode::Closed(conn, "closed by the server".into()));
                        return;
                    }
                    Ok(n) => {
                        if tx.send(FromNode::Data(conn, buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(FromNode::Closed(conn, e.to_string()));
                        return;
                    }
                }
            }
        });
    }

    /// Waits for bytes from a node or the engine's next deadline.
    fn wait(&mut self) {
        let now = Instant::now();
        let until = self
            .engine
            .poll_timeout()
            .unwrap_or(now + Duration::from_secs(1));
        let pause = until
            .saturating_duration_since(now)
            .min(Duration::from_secs(1));
        match self.rx.recv_timeout(pause) {
            Ok(FromNode::Data(conn, bytes)) if self.sockets.contains_key(&conn) => {
                self.engine.handle_data(Instant::now(), conn, &bytes);
            }
            Ok(FromNode::Closed(conn, reason)) if self.sockets.contains_key(&conn) => {
                self.forget(conn);
                self.engine.handle_closed(Instant::now(), conn, &reason);
            }
            // From a connection the engine closed already.
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => self.engine.handle_timeout(Instant::now()),
            // The client holds a sender: this cannot happen.
            Err(RecvTimeoutError::Disconnected) => {}
        }
    }
}

fn connect(endpoint: &Endpoint) -> Result<TcpStream, String> {
    let text = endpoint.to_string();
    let addrs = text.to_socket_addrs().map_err(|e| e.to_string())?;
    let mut last = format!("{text}: no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(socket) => {
                let _ = socket.set_nodelay(true);
                return Ok(socket);
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

fn describe(event: &Event) -> String {
    match event {
        Event::SlotMapChanged { masters, assigned } => {
            format!("slot map: {assigned} slots on {masters} masters")
        }
        Event::ConnectionLost { endpoint, reason } => format!("lost {endpoint}: {reason}"),
        other => format!("{other:?}"),
    }
}

/// One reply on one line.
fn render(frame: &Frame) -> String {
    match frame {
        Frame::SimpleString(b) | Frame::BulkString(b) | Frame::Double(b) | Frame::BigNumber(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::VerbatimString { text, .. } => String::from_utf8_lossy(text).into_owned(),
        Frame::SimpleError(b) | Frame::BulkError(b) => {
            format!("(error) {}", String::from_utf8_lossy(b))
        }
        Frame::Integer(n) => n.to_string(),
        Frame::Boolean(b) => b.to_string(),
        Frame::NullBulkString | Frame::NullArray | Frame::Null => "(nil)".into(),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        Frame::Map(pairs) => {
            let pairs: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", render(k), render(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn main() {
    let mut verbose = false;
    // The options, the seed, then the command's words as they are.
    let mut args: Vec<String> = Vec::new();
    let mut parser = lexopt::Parser::from_env();
    let usage = |why: &dyn std::fmt::Display| -> ! {
        eprintln!("cluster-client: {why}\n{USAGE}");
        std::process::exit(2);
    };
    loop {
        use lexopt::Arg::{Long, Short, Value};
        let arg = match parser.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(e) => usage(&e),
        };
        match arg {
            Short('h') | Long("help") => {
                println!("{USAGE}");
                return;
            }
            Short('V') | Long("version") => {
                println!("cluster-client {}", env!("CARGO_PKG_VERSION"));
                return;
            }
            Short('v') => verbose = true,
            Value(seed) => {
                args.push(seed.to_string_lossy().into_owned());
                match parser.raw_args() {
                    Ok(rest) => args.extend(rest.map(|w| w.to_string_lossy().into_owned())),
                    Err(e) => usage(&e),
                }
            }
            other => usage(&other.unexpected()),
        }
    }
    let seed = match args.first() {
        None => usage(&"HOST:PORT first"),
        Some(first) => first
            .parse::<Endpoint>()
            .unwrap_or_else(|_| usage(&format!("not HOST:PORT: {first}"))),
    };
    let mut client = Client::new(seed, verbose);
    let words = |line: &[String]| line.iter().map(|w| Bytes::from(w.clone())).collect();
    if args.len() > 1 {
        let reply = client.call(words(&args[1..]));
        for push in std::mem::take(&mut client.pushes) {
            println!("{}", render(&push));
        }
        if let Some(reply) = &reply {
            println!("{}", render(reply));
        }
        std::process::exit(i32::from(reply.as_ref().is_some_and(Frame::is_error)));
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if argv.is_empty() {
            continue;
        }
        let reply = client.call(words(&argv));
        let lines: Vec<String> = std::mem::take(&mut client.pushes)
            .iter()
            .chain(reply.as_ref())
            .map(render)
            .collect();
        for line in lines {
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return; // the reader went away
            }
        }
    }
}
