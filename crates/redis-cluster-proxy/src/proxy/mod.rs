//! The proxy, as a module the binary's `main` and the integration tests share:
//! configuration, backend connections, the cluster pool, client connections, counters.

pub(crate) mod backend;
pub(crate) mod client;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod driver;
pub(crate) mod log;
pub(crate) mod net;
pub(crate) mod sentinel;
pub(crate) mod stats;
pub(crate) mod twem;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use cluster::Topology;
use redis_cluster_proto::route::ReadFrom;

pub(crate) use config::{Config, PoolKind};

/// The pools listening, with their addresses.
pub(crate) struct Running {
    /// Each pool's listen address, in configuration order.
    pub(crate) addrs: Vec<SocketAddr>,
    /// Each pool.
    pub(crate) pools: Vec<Arc<cluster::Pool>>,
}

/// Binds every pool, loads each cluster's slot map (retried in the background if no seed
/// answers yet) and serves clients until the runtime stops.
pub(crate) async fn start(config: Config) -> std::io::Result<Running> {
    let mut running = Running {
        addrs: Vec::new(),
        pools: Vec::new(),
    };
    for pool in config.pools {
        let listener = listen(&pool.listen, pool.backlog).await?;
        running.addrs.push(listener.local_addr()?);
        let stats = Arc::new(stats::Stats::default());
        let server_stats = stats::ServerTable::default();
        let table = server_stats.clone();
        let engine = |seeds: &[String], fixed, read_from| {
            driver::EngineHandle::start(
                seeds,
                fixed,
                read_from,
                pool.timeout,
                pool.password.clone(),
                stats.clone(),
                move |addr| cluster::stats_for(&table, addr),
                pool.name.clone(),
            )
        };
        let mut follow = None;
        let topology = match pool.kind.clone() {
            PoolKind::Cluster { seeds, read_from } => {
                Topology::Cluster(engine(&seeds, None, read_from))
            }
            PoolKind::Sentinel { sentinels, groups } => {
                // No master is known yet: the follower names them as it learns them.
                let groups = Arc::new(sentinel::Groups::new(sentinels, groups));
                let handle = engine(&[], Some(Default::default()), ReadFrom::Master);
                follow = Some((groups.clone(), handle.clone()));
                Topology::Groups(handle, groups)
            }
            PoolKind::Static { servers } => {
                let groups = Arc::new(sentinel::Groups::fixed(servers));
                let handle = engine(&[], Some(groups.map()), ReadFrom::Master);
                Topology::Groups(handle, groups)
            }
            PoolKind::Twemproxy(twem) => Topology::Ring(twem::Ring::new(&twem)),
        };
        let mut built = cluster::Pool::new(
            pool.name.clone(),
            topology,
            pool.password.clone(),
            pool.timeout,
            stats,
            server_stats,
        );
        built.read_buffer = config.read_buffer;
        built.maxclients = pool.maxclients;
        built.client_timeout = pool.client_timeout;
        built.limits = pool.limits;
        let cluster = Arc::new(built);
        if matches!(&pool.kind, PoolKind::Twemproxy(twem) if twem.preconnect) {
            cluster.preconnect().await;
        }
        if let Some((groups, handle)) = follow {
            tokio::spawn(
                groups
                    .clone()
                    .follow(pool.timeout, pool.password.clone(), handle),
            );
            // Clients are served at once; a few timeouts are given to learn every master
            // first (commands for one not known yet are retried, then CLUSTERDOWN).
            match groups.wait_known(pool.timeout * 3).await {
                Ok(()) => {
                    cluster
                        .stats
                        .refreshes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => log::write(
                    log::WARN,
                    format_args!("pool {}: {e}; still asking the Sentinels", pool.name),
                ),
            }
        }
        running.pools.push(cluster.clone());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, from)) => {
                        if log::enabled(log::INFO) {
                            log::write(
                                log::INFO,
                                format_args!("accepted client {from} on pool {}", cluster.name),
                            );
                        }
                        tokio::spawn(client::serve(stream, cluster.clone()));
                    }
                    Err(e) => {
                        log::write(
                            log::WARN,
                            format_args!("pool {}: accept: {e}", cluster.name),
                        );
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        });
    }
    Ok(running)
}

/// A listener on `addr` (`host:port`) with a listen queue of `backlog`.
async fn listen(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr}: no address"));
    for at in tokio::net::lookup_host(addr).await? {
        let socket = match at {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(at) {
            Ok(()) => return socket.listen(backlog),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Serves nutcracker's stats document on `addr`: each connection gets the document as it
/// was at the last aggregation, every `interval`, then is closed.
pub(crate) async fn serve_stats(
    addr: &str,
    interval: std::time::Duration,
    pools: Vec<Arc<cluster::Pool>>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let started = std::time::Instant::now();
    let source = twem::hostname();
    let listeners = pools.len() as u64;
    let aggregate = move || {
        let process = twem::Process {
            source: source.clone(),
            uptime: started.elapsed().as_secs(),
            listeners,
        };
        twem::document(&process, &pools)
    };
    let current = Arc::new(std::sync::RwLock::new(aggregate()));
    let writer = current.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            let text = aggregate();
            *writer.write().unwrap_or_else(|e| e.into_inner()) = text;
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let text = current.read().unwrap_or_else(|e| e.into_inner()).clone();
            tokio::spawn(async move {
                let _ = stream.write_all(text.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(local)
}
