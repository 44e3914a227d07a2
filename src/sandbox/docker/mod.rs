//! The Docker implementation of [`Sandbox`](super::Sandbox): one container
//! per run, driven through bollard.
//!
//! Why it is shaped this way (numbers measured on engine 20.10):
//! - A container costs ~110 ms to create and start, so it is created lazily
//!   on first use (or in `prepare()` when `create_on_start` is set) and
//!   exactly once per run.
//! - A `docker exec` costs ~60 ms in the engine, whoever calls it. The
//!   model's `shell` commands therefore go to one long-lived shell per run
//!   (`shell`), written to its stdin and delimited by random end markers:
//!   a round trip is about a millisecond and `cd`/`export` carry over.
//! - Docker cannot kill an exec. Commands past their timeout are killed from
//!   inside the container by a small helper exec (`scripts`).
//! - Files move as tar archives (`files`), never through shell quoting.
//! - Containers live outside the daemon's cgroup; nothing removes them but
//!   us, hence labels and [`DockerSandboxProvider::reap_orphans`].
//! - Containment (issue 11): logs off, a read-only root, the work dir and
//!   /tmp as size-limited tmpfs volumes (memory, never the host's disk),
//!   `nofile`/`fsize` ulimits, every command an exec as `[sandbox] user`
//!   (uid 1000 by default) while PID 1 runs as `nobody`, out of its reach,
//!   and auto-removal so a container stopped behind our back (killed, an
//!   engine restart) does not linger.
//!
//! Module map: `engine` connects to the engine and words its errors;
//! `isolation` warns about what weakens the sandbox on that engine (old
//! engine or runc, no seccomp, no user namespace); `container` creates and removes containers; `exec` runs one-off
//! commands; `shell` keeps the persistent session; `output` bounds what
//! is buffered; `files` moves files; `leftovers` removes what a run
//! left, in the background when the engine cannot take it at once;
//! `reaper` removes orphans at start and stop;
//! `user` turns `[sandbox] user` into numbers; `pool` keeps containers
//! ready ahead of runs; `provider` and `sandbox` tie them to the traits.

mod container;
mod engine;
mod exec;
mod files;
mod isolation;
mod leftovers;
mod output;
mod owner;
mod pool;
mod provider;
mod reaper;
mod sandbox;
mod scripts;
mod shell;
mod user;

pub use container::{parse_memory_limit, LABEL_MANAGED, LABEL_POOL, LABEL_RUN};
pub use owner::LABEL_OWNER;
pub use pool::PoolRoom;
pub use provider::{DockerSandboxProvider, DEFAULT_MAX_READ_BYTES};
pub use sandbox::DockerSandbox;
