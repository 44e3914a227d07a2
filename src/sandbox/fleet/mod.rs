//! Many engines: the [`Fleet`] provider places each run's sandbox on one
//! of the `[[sandbox.engines]]` (the reachable engine with the most free
//! capacity, weighted), keeps the whole run there, makes runs wait while
//! every reachable engine is full, probes the engines and takes a failed
//! one out of placement until it answers again.
//!
//! One job per file: `settings` (the entries and their rules),
//! `placement` (the board of slots and the choice), `health` (the probe
//! task), `sandbox` (the per-run sandbox that delegates to its engine's
//! [`DockerSandbox`](super::docker::DockerSandbox)). Each engine is a
//! [`DockerSandboxProvider`] of its own: connection, owner label, reaper.

mod health;
mod placement;
mod sandbox;
mod settings;

use std::sync::Arc;
use std::time::Duration;

pub use settings::{check, tls_files, EngineConfig, TlsFiles, DEFAULT_ENGINE_NAME};

use self::placement::{Board, Seat};
use self::sandbox::FleetSandbox;
use super::docker::DockerSandboxProvider;
use super::{Sandbox, SandboxConfig, SandboxError, SandboxProvider};

/// What status reports about one engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineReport {
    pub name: String,
    pub address: String,
    /// As the last probe found it (`true` before the first).
    pub reachable: bool,
    /// Sandboxes this daemon placed there and has not freed.
    pub containers: usize,
    /// `max_containers`; `None`: unbounded.
    pub capacity: Option<usize>,
    /// The last probe failure, kept after the engine rejoins.
    pub last_error: Option<String>,
    /// Its warm pool (counted in `containers`).
    pub pool: crate::sandbox::PoolStatus,
}

/// The sandbox provider over every configured engine.
pub struct Fleet {
    /// `[[sandbox.engines]]` given: engine failures end runs at once.
    strict: bool,
    /// The entries the fleet was made from, for [`Self::reconfigure`].
    entries: Vec<EngineConfig>,
    board: Arc<Board>,
    engines: Arc<Vec<DockerSandboxProvider>>,
    /// The probe task; aborted with the fleet.
    health: Option<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// One provider per entry of [`SandboxConfig::engine_list`]. Fails on
    /// configuration errors only, never because an engine is down. Call
    /// [`Self::start_probes`] inside a runtime to follow engine health.
    pub fn new(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let list = config.engine_list();
        // Configured engines follow their health; the implicit one behaves
        // as the single engine always did (see `Seat::follow_health`).
        let strict = !config.engines.is_empty();
        let seats = list
            .iter()
            .map(|e| Seat::new(e.max_containers, e.weight, strict))
            .collect();
        let names = list.iter().map(|e| e.name.clone()).collect();
        let board = Board::new(names, seats);
        let mut engines = Vec::with_capacity(list.len());
        for (index, entry) in list.iter().enumerate() {
            // Every engine's pool goes through the board, bounded or not,
            // so the engine's `containers` counts it either way.
            let room = Arc::new(placement::EngineRoom {
                board: board.clone(),
                index,
            });
            let provider = DockerSandboxProvider::for_engine(config, entry, Some(room)).map_err(
                |e| match e {
                    SandboxError::Unavailable(m) | SandboxError::Failed(m) if strict => {
                        SandboxError::Unavailable(format!("engine {}: {m}", entry.name))
                    }
                    other => other,
                },
            )?;
            engines.push(provider);
        }
        Ok(Fleet {
            strict,
            entries: list.clone(),
            board,
            engines: Arc::new(engines),
            health: None,
        })
    }

    /// Starts the probe task (needs a tokio runtime): every engine pinged
    /// every few seconds, the first round at once.
    pub fn start_probes(mut self) -> Self {
        let task = health::watch(self.board.clone(), self.engines.clone());
        self.health = Some(tokio::spawn(task));
        self
    }

    /// Probes every engine once now (start-up, tests).
    pub async fn probe_now(&self) {
        let answers = futures::future::join_all(self.engines.iter().map(health::probe)).await;
        for (index, answer) in answers.into_iter().enumerate() {
            health::record(&self.board, index, answer);
        }
    }

    /// The engines' providers, in configuration order.
    pub fn engines(&self) -> &[DockerSandboxProvider] {
        &self.engines
    }

    /// The first engine: what the single-engine status field and
    /// `agentd run --local` use.
    pub fn first(&self) -> Option<&DockerSandboxProvider> {
        self.engines.first()
    }

    /// Each engine as status shows it.
    pub fn report(&self) -> Vec<EngineReport> {
        self.board
            .snapshot()
            .into_iter()
            .enumerate()
            .map(
                |(i, (placed, capacity, reachable, last_error))| EngineReport {
                    name: self.board.name(i).to_string(),
                    address: self
                        .engines
                        .get(i)
                        .map(|e| e.engine_address().to_string())
                        .unwrap_or_default(),
                    reachable,
                    containers: placed,
                    capacity,
                    last_error,
                    pool: self
                        .engines
                        .get(i)
                        .map(DockerSandboxProvider::pool_status)
                        .unwrap_or_default(),
                },
            )
            .collect()
    }

    /// Starts every engine's warm pool (a daemon does; needs a runtime),
    /// each bounded by what its engine may still hold.
    pub fn start_pools(&self) {
        for engine in self.engines.iter() {
            engine.start_pool();
        }
    }

    /// Removes every engine's pooled containers and stops refilling (at
    /// shutdown, before the last reap).
    pub async fn drain_pools(&self) -> usize {
        let drains = self.engines.iter().map(DockerSandboxProvider::drain_pool);
        futures::future::join_all(drains).await.into_iter().sum()
    }

    /// `[sandbox]` changed (SIGHUP): runs started from now on get `config`
    /// on the same engines, and each pool is remade. A different list of
    /// engines (names, addresses, TLS files, capacities, weights) is
    /// refused: the board of slots is the running daemon's, so that needs
    /// a restart. The implicit single engine may change its address.
    pub fn reconfigure(&self, config: &SandboxConfig) -> Result<(), SandboxError> {
        if !self.same_engines(config) {
            return Err(SandboxError::Unavailable(
                "a change to [[sandbox.engines]] takes effect at the next restart".into(),
            ));
        }
        let list = config.engine_list();
        DockerSandboxProvider::check(config)?;
        for (engine, entry) in self.engines.iter().zip(&list) {
            engine.reconfigure(config, entry)?;
        }
        Ok(())
    }

    /// Whether `config` keeps this fleet's engines (what
    /// [`Self::reconfigure`] can apply without a restart).
    pub fn same_engines(&self, config: &SandboxConfig) -> bool {
        let strict = !config.engines.is_empty();
        strict == self.strict
            && config.engine_list().len() == self.engines.len()
            && (!strict || config.engine_list() == self.entries)
    }

    /// Reaps every reachable engine's orphans (see
    /// [`DockerSandboxProvider::reap_orphans`]), each bounded by `within`;
    /// returns per engine its name and what happened. The owner label keeps
    /// other daemons' containers on a shared engine out of it.
    pub async fn reap_orphans(
        &self,
        live_run_ids: &[String],
        within: Duration,
    ) -> Vec<(String, Result<usize, SandboxError>)> {
        let reaps = self
            .engines
            .iter()
            .enumerate()
            .map(|(i, engine)| async move {
                let name = self.board.name(i).to_string();
                let result =
                    match tokio::time::timeout(within, engine.reap_orphans(live_run_ids)).await {
                        Ok(r) => r,
                        Err(_) => Err(SandboxError::Unavailable(format!(
                            "reaping timed out after {}s",
                            within.as_secs()
                        ))),
                    };
                (name, result)
            });
        futures::future::join_all(reaps).await
    }
}

impl SandboxProvider for Fleet {
    fn for_run(&self, run_id: &str) -> Arc<dyn Sandbox> {
        Arc::new(FleetSandbox::new(
            run_id,
            self.board.clone(),
            self.engines.clone(),
            self.strict,
        ))
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(task) = self.health.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::CommandSpec;

    fn engine(name: &str, socket: &str) -> EngineConfig {
        EngineConfig {
            name: name.into(),
            docker_host: Some(format!("unix://{socket}")),
            tls: None,
            max_containers: Some(2),
            weight: 1.0,
        }
    }

    fn echo() -> CommandSpec {
        CommandSpec {
            command: "echo".into(),
            workdir: None,
            timeout: None,
            stdin: None,
        }
    }

    #[tokio::test]
    async fn with_no_engine_reachable_a_run_fails_at_once_naming_each() {
        let config = SandboxConfig {
            engines: vec![
                engine("a", "/nonexistent/a.sock"),
                engine("b", "/nonexistent/b.sock"),
            ],
            ..SandboxConfig::default()
        };
        let fleet = Fleet::new(&config).expect("valid");
        fleet.probe_now().await;
        let report = fleet.report();
        assert_eq!(report.len(), 2);
        assert!(report.iter().all(|e| !e.reachable && e.containers == 0));
        assert!(
            report[0]
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("a.sock")),
            "{report:?}"
        );
        let sandbox = fleet.for_run("r1");
        let err = sandbox.run(echo()).await.expect_err("nothing reachable");
        let text = err.to_string();
        assert!(
            text.starts_with("sandbox unavailable: no engine is reachable (engine a: "),
            "{text}"
        );
        assert!(text.contains("; engine b: "), "{text}");
        assert_eq!(sandbox.fatal_error(), Some(err), "the run ends on it");
        sandbox.destroy().await;
        assert_eq!(fleet.report()[0].containers, 0, "nothing was placed");
    }

    #[tokio::test]
    async fn the_implicit_engine_words_errors_as_before() {
        let config = SandboxConfig {
            docker_host: Some("unix:///nonexistent/d.sock".into()),
            ..SandboxConfig::default()
        };
        let fleet = Fleet::new(&config).expect("valid");
        fleet.probe_now().await;
        assert_eq!(fleet.report()[0].name, DEFAULT_ENGINE_NAME);
        assert_eq!(fleet.report()[0].capacity, None);
        let sandbox = fleet.for_run("r1");
        let err = sandbox.run(echo()).await.expect_err("no engine");
        let text = err.to_string();
        assert!(
            text.starts_with(
                "sandbox unavailable: cannot reach the Docker engine at unix:///nonexistent/d.sock"
            ),
            "placed despite the failed probe, and worded as before: {text}"
        );
        assert_eq!(fleet.report()[0].containers, 1);
        sandbox.destroy().await;
        assert_eq!(fleet.report()[0].containers, 0, "destroy frees the slot");
    }
}
