//! The toy proxy, as a module the example's `main` and the integration tests share:
//! configuration, backend connections, the cluster pool, client connections, counters.

pub(crate) mod backend;
pub(crate) mod client;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod sentinel;
pub(crate) mod stats;

use std::net::SocketAddr;
use std::sync::Arc;

use redis_cluster_proto::route::twemproxy;
use tokio::net::TcpListener;

pub(crate) use config::{Config, PoolKind};

/// How often a cluster pool reloads its slot map without being told to.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(2);

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
        let listener = TcpListener::bind(&pool.listen).await?;
        running.addrs.push(listener.local_addr()?);
        let stats = Arc::new(stats::Stats::default());
        let (seeds, read_from, groups) = match pool.kind.clone() {
            PoolKind::Cluster { seeds, read_from } => (seeds, read_from, None),
            PoolKind::Sentinel { sentinels, groups } => (
                Vec::new(),
                Default::default(),
                Some(Arc::new(sentinel::Groups::new(sentinels, groups))),
            ),
            PoolKind::Static { servers } => (
                Vec::new(),
                Default::default(),
                Some(Arc::new(sentinel::Groups::fixed(servers))),
            ),
            PoolKind::Twemproxy(_) => (Vec::new(), Default::default(), None),
        };
        let ring = match &pool.kind {
            PoolKind::Twemproxy(twem) => {
                let weighted: Vec<twemproxy::Weighted> = twem
                    .servers
                    .iter()
                    .map(|s| twemproxy::Weighted {
                        name: s.name.clone(),
                        weight: s.weight,
                    })
                    .collect();
                Some(cluster::Ring {
                    hash: twem.hash,
                    hash_tag: twem.hash_tag,
                    continuum: twemproxy::Continuum::new(twem.distribution, &weighted),
                    addrs: twem.servers.iter().map(|s| s.address.clone()).collect(),
                    db: twem.redis_db,
                })
            }
            _ => None,
        };
        let mut built = cluster::Pool::new(
            pool.name.clone(),
            seeds,
            read_from,
            groups.clone(),
            pool.password.clone(),
            pool.timeout,
            stats,
        );
        if let Some(ring) = ring {
            built = built.with_ring(ring);
        }
        let cluster = Arc::new(built);
        if let Some(groups) = groups.filter(|g| !g.sentinels.is_empty()) {
            // The watcher discovers the masters itself once subscribed.
            let pool_ = cluster.clone();
            let password = pool.password.clone();
            tokio::spawn(groups.watch(pool.timeout, password, move |old, _new| {
                pool_.switched(old);
            }));
        }
        if cluster.sentinel.is_none() && cluster.ring.is_none() {
            // The map is also reloaded every few seconds, not only after a redirect: replicas
            // appear in CLUSTER SLOTS once they have an offset, and a slot can move without
            // this proxy's clients touching it.
            let pool_ = cluster.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(REFRESH).await;
                    pool_.refresh_soon();
                }
            });
        }
        if let Err(e) = cluster.refresh().await {
            eprintln!("pool {}: no slot map yet ({e}); retrying", pool.name);
            cluster.refresh_soon();
        }
        running.pools.push(cluster.clone());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(client::serve(stream, cluster.clone()));
                    }
                    Err(e) => {
                        eprintln!("pool {}: accept: {e}", cluster.name);
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        });
    }
    Ok(running)
}
