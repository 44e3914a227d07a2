//! HTTP/1.1 to the daemon over its Unix socket.
//!
//! One connection per request: the CLI makes a handful of requests per
//! command, so pooling would only add state to get wrong.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::UnixStream;

use super::exit;
use crate::api::ErrorBody;

/// A daemon that accepted the connection but says nothing is as stuck as
/// one that is not there; waiting forever would hide it. Event streams are
/// exempt: a quiet run is normal.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

const JSON: &str = "application/json";

/// Transcripts hold whole tool outputs; this only stops a runaway body.
const MAX_BODY: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{}", connect_message(.path, .source))]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The daemon answered with an error; `message` is its own words.
    #[error("{message}")]
    Http {
        status: StatusCode,
        code: String,
        message: String,
    },
    /// The daemon answered something this CLI cannot read, or the
    /// connection broke mid-answer.
    #[error("{0}")]
    Protocol(String),
}

fn connect_message(path: &Path, source: &std::io::Error) -> String {
    let path = path.display();
    match source.kind() {
        ErrorKind::PermissionDenied => format!(
            "cannot connect to agentd at {path}: permission denied (join the socket's group, or run as its owner)"
        ),
        _ => format!("cannot connect to agentd at {path}: is the service running?"),
    }
}

impl ClientError {
    /// Not reaching the daemon is a setup problem (like bad usage); a
    /// refusal from the daemon is the command failing.
    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Connect { .. } => exit::USAGE,
            ClientError::Http { .. } | ClientError::Protocol(_) => 1,
        }
    }

    pub fn is_status(&self, status: StatusCode) -> bool {
        matches!(self, ClientError::Http { status: s, .. } if *s == status)
    }
}

#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
}

impl Client {
    pub fn new(socket: PathBuf) -> Self {
        Client { socket }
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let body = self.call(Method::GET, path, None).await?;
        decode(path, &body)
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        let json = serde_json::to_vec(body)
            .map_err(|e| ClientError::Protocol(format!("cannot encode the request: {e}")))?;
        let answer = self.call(Method::POST, path, Some((json, JSON))).await?;
        decode(path, &answer)
    }

    /// A PUT whose body is `bytes` as they are (a plugin component).
    pub async fn put_bytes<T: DeserializeOwned>(
        &self,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<T, ClientError> {
        let answer = self
            .call(Method::PUT, path, Some((bytes, "application/wasm")))
            .await?;
        decode(path, &answer)
    }

    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.call(Method::DELETE, path, None).await?;
        decode(path, &answer)
    }

    /// A POST with no body, as `cancel` takes.
    pub async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.call(Method::POST, path, None).await?;
        decode(path, &answer)
    }

    /// The response body of a successful request, to read as it arrives.
    pub async fn stream(&self, path: &str) -> Result<Incoming, ClientError> {
        let response = self.send(Method::GET, path, None).await?;
        Ok(check(response).await?.into_body())
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
    ) -> Result<Bytes, ClientError> {
        let exchange = async {
            let response = check(self.send(method, path, body).await?).await?;
            read_body(response.into_body()).await
        };
        match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Protocol(format!(
                "agentd at {} did not answer {path} within {} s",
                self.socket.display(),
                ANSWER_TIMEOUT.as_secs()
            ))),
        }
    }

    /// `body` is the bytes and their content type.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &'static str)>,
    ) -> Result<Response<Incoming>, ClientError> {
        let stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|source| ClientError::Connect {
                    path: self.socket.clone(),
                    source,
                })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| broken(&self.socket, e))?;
        tokio::spawn(async move {
            // Its errors surface through `send_request` or the body.
            let _ = connection.await;
        });
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, "agentd")
            .header(ACCEPT, "application/json")
            .header(
                USER_AGENT,
                concat!("agentd-cli/", env!("CARGO_PKG_VERSION")),
            );
        let body = match body {
            Some((bytes, content_type)) => {
                request = request.header(CONTENT_TYPE, content_type);
                bytes
            }
            None => Vec::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ClientError::Protocol(format!("cannot build the request {path}: {e}")))?;
        sender
            .send_request(request)
            .await
            .map_err(|e| broken(&self.socket, e))
    }
}

fn broken(socket: &Path, e: hyper::Error) -> ClientError {
    ClientError::Protocol(format!(
        "the connection to agentd at {} broke: {e}",
        socket.display()
    ))
}

/// Turns an error status into the daemon's own message.
async fn check(response: Response<Incoming>) -> Result<Response<Incoming>, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_body(response.into_body()).await.unwrap_or_default();
    Err(error_from(status, &body))
}

fn error_from(status: StatusCode, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => ClientError::Http {
            status,
            code: e.error.code,
            message: e.error.message,
        },
        // Not the API's error shape: a proxy, or a daemon too old for the
        // route. Show what there is.
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            ClientError::Http {
                status,
                code: String::new(),
                message: if text.is_empty() {
                    format!("the daemon answered HTTP {status}")
                } else {
                    format!("the daemon answered HTTP {status}: {text}")
                },
            }
        }
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, ClientError> {
    Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ClientError::Protocol(format!("cannot read the daemon's answer: {e}")))
}

fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| {
        ClientError::Protocol(format!(
            "unexpected answer to {path}: {e} (is the daemon the same version as this CLI?)"
        ))
    })
}

/// For answers kept as JSON (to print them whole with `--json`) and also
/// read as a type.
pub fn from_value<T: DeserializeOwned>(
    what: &str,
    value: &serde_json::Value,
) -> Result<T, ClientError> {
    T::deserialize(value).map_err(|e| {
        ClientError::Protocol(format!(
            "unexpected answer for {what}: {e} (is the daemon the same version as this CLI?)"
        ))
    })
}

/// Run ids come from the user; anything outside the unreserved set is
/// escaped so that a stray `/` or `?` cannot reach another route.
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_become_the_daemons_message() {
        let e = error_from(
            StatusCode::NOT_FOUND,
            br#"{"error":{"code":"not_found","message":"no run `x`"}}"#,
        );
        assert_eq!(e.to_string(), "no run `x`");
        assert_eq!(e.exit_code(), 1);
        assert!(e.is_status(StatusCode::NOT_FOUND));
        let e = error_from(StatusCode::METHOD_NOT_ALLOWED, b"");
        assert_eq!(
            e.to_string(),
            "the daemon answered HTTP 405 Method Not Allowed"
        );
    }

    #[test]
    fn connect_failures_name_the_socket_and_exit_2() {
        let e = ClientError::Connect {
            path: "/run/x.sock".into(),
            source: std::io::Error::from(ErrorKind::NotFound),
        };
        assert_eq!(
            e.to_string(),
            "cannot connect to agentd at /run/x.sock: is the service running?"
        );
        assert_eq!(e.exit_code(), 2);
        let e = ClientError::Connect {
            path: "/run/x.sock".into(),
            source: std::io::Error::from(ErrorKind::PermissionDenied),
        };
        assert!(e.to_string().contains("permission denied"), "{e}");
    }

    #[test]
    fn user_input_cannot_escape_its_path_segment() {
        assert_eq!(path_segment("ab12-_.~"), "ab12-_.~");
        assert_eq!(path_segment("a/b?c d"), "a%2Fb%3Fc%20d");
        assert_eq!(path_segment("é"), "%C3%A9");
    }
}
