//! Reaching the Docker engine, and wording its failures for the model.
//!
//! bollard 0.21 puts its own API version (1.53) in every path and its
//! `negotiate_version()` asks `/v1.53/version`, which an older engine
//! (20.10 speaks 1.41) refuses with 400 "client version 1.53 is too new.
//! Maximum supported API version is 1.41". So [`open`] asks once, reads the
//! engine's maximum from the answer or from that refusal, and reconnects
//! with the lower version.

use std::time::Duration;

use bollard::errors::Error as DockerError;
use bollard::{ClientVersion, Docker, API_DEFAULT_VERSION};

use crate::sandbox::{SandboxError, TlsFiles};

/// bollard's per-request timeout (it only covers response headers; streams
/// are bounded by the callers).
const REQUEST_TIMEOUT_SECS: u64 = 120;
/// How long a version probe or ping may take before the engine counts as
/// unreachable.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the engine is, as configured (`docker_host`) or from `DOCKER_HOST`.
#[derive(Debug, Clone)]
pub(crate) enum Host {
    Unix(String),
    Http(String),
    Ssh(String),
    /// `tcp://` (or `https://`) with a client certificate, as Docker's
    /// `--tlsverify` wants.
    Tls {
        addr: String,
        tls: TlsFiles,
    },
}

impl Host {
    /// `configured` is `[sandbox] docker_host`; `None` means `DOCKER_HOST`,
    /// then the default socket, as the docker CLI does.
    pub(crate) fn parse(configured: Option<&str>) -> Result<(Host, String), String> {
        let from_env = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty());
        let (text, source) = match configured.map(str::trim).filter(|h| !h.is_empty()) {
            Some(h) => (h.to_string(), "[sandbox] docker_host"),
            None => match from_env {
                Some(h) => (h, "DOCKER_HOST"),
                None => ("unix:///var/run/docker.sock".to_string(), "the default"),
            },
        };
        let host = if let Some(path) = text.strip_prefix("unix://") {
            Host::Unix(path.to_string())
        } else if text.starts_with('/') {
            Host::Unix(text.clone())
        } else if text.starts_with("tcp://") || text.starts_with("http://") {
            Host::Http(text.clone())
        } else if text.starts_with("ssh://") {
            Host::Ssh(text.clone())
        } else if text.starts_with("https://") {
            return Err(format!(
                "docker host `{text}` (from {source}) needs TLS: give it tls_ca, tls_cert and \
                 tls_key in a [[sandbox.engines]] entry"
            ));
        } else {
            return Err(format!(
                "docker host `{text}` (from {source}) is not supported: use \
                 unix:///path/to/docker.sock, tcp://host:port, http://host:port or ssh://user@host"
            ));
        };
        let display = match &host {
            Host::Unix(p) => format!("unix://{p}"),
            _ => text,
        };
        Ok((host, display))
    }

    /// Like [`Self::parse`], for one `[[sandbox.engines]]` entry: with
    /// `tls`, a `tcp://` or `https://` address is reached over TLS.
    pub(crate) fn parse_engine(
        configured: Option<&str>,
        tls: Option<&TlsFiles>,
    ) -> Result<(Host, String), String> {
        let Some(tls) = tls else {
            return Host::parse(configured);
        };
        let text = configured.map(str::trim).unwrap_or("");
        let rest = text
            .strip_prefix("tcp://")
            .or_else(|| text.strip_prefix("https://"))
            .ok_or_else(|| {
                format!("docker host `{text}`: TLS settings apply to tcp:// addresses only")
            })?;
        Ok((
            Host::Tls {
                addr: format!("tcp://{rest}"),
                tls: tls.clone(),
            },
            format!("tcp://{rest} (TLS)"),
        ))
    }

    fn connect(&self, version: &ClientVersion) -> Result<Docker, DockerError> {
        match self {
            Host::Tls { addr, tls } => Docker::connect_with_ssl(
                addr,
                &tls.key,
                &tls.cert,
                &tls.ca,
                REQUEST_TIMEOUT_SECS,
                version,
            ),
            Host::Unix(path) => Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, version),
            Host::Http(addr) => Docker::connect_with_http(addr, REQUEST_TIMEOUT_SECS, version),
            // Runs `ssh <host> docker system dial-stdio`: needs the OpenSSH
            // client here and key-based login there.
            Host::Ssh(addr) => Docker::connect_with_ssh(addr, REQUEST_TIMEOUT_SECS, version, None),
        }
    }
}

/// An engine connection, with what the engine said about the isolation it
/// gives (see [`super::isolation`]).
#[derive(Clone)]
pub(crate) struct Connected {
    pub(crate) docker: Docker,
    pub(crate) warnings: Vec<String>,
}

/// Connects and settles on an API version both sides speak.
pub(crate) async fn open(host: &Host, display: &str) -> Result<Connected, SandboxError> {
    let docker = negotiate(host, display).await?;
    let warnings = super::isolation::assess(&docker, display).await;
    Ok(Connected { docker, warnings })
}

async fn negotiate(host: &Host, display: &str) -> Result<Docker, SandboxError> {
    let unreachable = |e: &DockerError| unreachable(display, e);
    let docker = host
        .connect(API_DEFAULT_VERSION)
        .map_err(|e| unreachable(&e))?;
    let answer = tokio::time::timeout(PROBE_TIMEOUT, docker.version())
        .await
        .map_err(|_| no_answer(display))?;
    let server = match answer {
        Ok(v) => v.api_version.as_deref().and_then(parse_version),
        Err(DockerError::DockerResponseServerError {
            status_code: 400,
            message,
        }) => Some(max_version_in(&message).ok_or_else(|| {
            SandboxError::Unavailable(format!(
                "the Docker engine at {display} refused the API version: {message}"
            ))
        })?),
        Err(e) => return Err(unreachable(&e)),
    };
    let Some(server) = server.filter(|v| v < API_DEFAULT_VERSION) else {
        return Ok(docker);
    };
    // Not `%display`: the macro expands `%x` to a call of its own `display`.
    let address = display;
    tracing::debug!(engine = %address, api = %server, "using the engine's older API version");
    let docker = host.connect(&server).map_err(|e| unreachable(&e))?;
    match tokio::time::timeout(PROBE_TIMEOUT, docker.ping()).await {
        Err(_) => Err(no_answer(display)),
        Ok(Err(e)) => Err(unreachable(&e)),
        Ok(Ok(_)) => Ok(docker),
    }
}

fn parse_version(v: &str) -> Option<ClientVersion> {
    let (major, minor) = v.trim().split_once('.')?;
    Some(ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    })
}

/// "client version 1.53 is too new. Maximum supported API version is 1.41"
fn max_version_in(message: &str) -> Option<ClientVersion> {
    let rest = message.split("Maximum supported API version is").nth(1)?;
    let v: String = rest
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    parse_version(v.trim_end_matches('.'))
}

fn no_answer(display: &str) -> SandboxError {
    SandboxError::Unavailable(format!(
        "cannot reach the Docker engine at {display}: no answer within {}s \
         (is it running? scripts/ensure-docker.sh starts one)",
        PROBE_TIMEOUT.as_secs()
    ))
}

pub(crate) fn unreachable(display: &str, e: &DockerError) -> SandboxError {
    SandboxError::Unavailable(format!(
        "cannot reach the Docker engine at {display}: {} \
         (is it running? scripts/ensure-docker.sh starts one)",
        chain(e)
    ))
}

/// The error with its sources: bollard's top-level messages ("client
/// error (Connect)") alone do not say what went wrong.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// Errors that mean the engine itself could not be talked to.
pub(crate) fn is_unreachable(e: &DockerError) -> bool {
    matches!(
        e,
        DockerError::SocketNotFoundError(_)
            | DockerError::HyperLegacyError { .. }
            | DockerError::IOError { .. }
            | DockerError::UnsupportedURISchemeError { .. }
    )
}

/// An operation on a sandbox failed; [`OpError::classify`] turns it into
/// what the model and the run loop see.
#[derive(Debug)]
pub(crate) enum OpError {
    /// The engine refused or could not be reached while doing `what`.
    Docker { what: String, err: DockerError },
    /// Already worded for the model.
    Msg(String),
    /// The container stopped: nothing will work again.
    Stopped,
}

impl OpError {
    pub(crate) fn docker(what: impl Into<String>) -> impl FnOnce(DockerError) -> OpError {
        let what = what.into();
        move |err| OpError::Docker { what, err }
    }

    /// Whether the engine itself could not be reached (it may be
    /// restarting).
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(self, OpError::Docker { err, .. } if is_unreachable(err))
    }

    /// The error to return, and whether the sandbox can never work again
    /// (its container is gone), which makes it the run's fatal error.
    pub(crate) fn classify(self, engine: &str, container: &str) -> (SandboxError, bool) {
        let (what, err) = match self {
            OpError::Msg(m) => return (SandboxError::Failed(m), false),
            OpError::Stopped => {
                return (
                    SandboxError::Failed(format!(
                        "the sandbox container {container} is not running any more (stopped or \
                         killed outside agentd); this run's sandbox cannot be used any more"
                    )),
                    true,
                )
            }
            OpError::Docker { what, err } => (what, err),
        };
        if is_unreachable(&err) {
            return (unreachable(engine, &err), false);
        }
        match &err {
            DockerError::DockerResponseServerError {
                status_code: 404,
                message,
            } if message.to_ascii_lowercase().contains("no such container") => (
                SandboxError::Failed(format!(
                    "the sandbox container {container} is gone (killed or removed outside \
                     agentd); this run's sandbox cannot be used any more"
                )),
                true,
            ),
            DockerError::DockerResponseServerError {
                status_code: 409,
                message,
            } if message.contains("is not running") => (
                SandboxError::Failed(format!(
                    "the sandbox container {container} is not running any more (stopped or \
                     killed outside agentd); this run's sandbox cannot be used any more"
                )),
                true,
            ),
            DockerError::DockerResponseServerError { message, .. } => {
                (SandboxError::Failed(format!("{what}: {message}")), false)
            }
            DockerError::RequestTimeoutError => (
                SandboxError::Failed(format!(
                    "{what}: the Docker engine did not answer within {REQUEST_TIMEOUT_SECS}s"
                )),
                false,
            ),
            other => (
                SandboxError::Failed(format!("{what}: {}", chain(other))),
                false,
            ),
        }
    }
}

/// Whether `err` is the engine's 404 for a missing container.
pub(crate) fn is_no_such_container(err: &DockerError) -> bool {
    matches!(err, DockerError::DockerResponseServerError { status_code: 404, message }
        if message.to_ascii_lowercase().contains("no such container"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_maximum_version_from_the_refusal() {
        let v =
            max_version_in("client version 1.53 is too new. Maximum supported API version is 1.41")
                .expect("parsed");
        assert_eq!((v.major_version, v.minor_version), (1, 41));
    }

    #[test]
    fn parses_hosts() {
        assert!(matches!(
            Host::parse(Some("unix:///x.sock")),
            Ok((Host::Unix(p), d)) if p == "/x.sock" && d == "unix:///x.sock"
        ));
        assert!(matches!(
            Host::parse(Some("tcp://h:2375")),
            Ok((Host::Http(_), _))
        ));
        assert!(matches!(
            Host::parse(Some("ssh://u@h")),
            Ok((Host::Ssh(_), _))
        ));
        let err = Host::parse(Some("https://h")).expect_err("tls");
        assert!(err.contains("tls_ca"), "{err}");
        let tls = TlsFiles {
            ca: "ca.pem".into(),
            cert: "cert.pem".into(),
            key: "key.pem".into(),
        };
        assert!(matches!(
            Host::parse_engine(Some("tcp://h:2376"), Some(&tls)),
            Ok((Host::Tls { addr, .. }, d)) if addr == "tcp://h:2376" && d == "tcp://h:2376 (TLS)"
        ));
        assert!(Host::parse_engine(Some("unix:///x"), Some(&tls)).is_err());
        assert!(Host::parse(Some("ftp://h")).is_err());
    }
}
