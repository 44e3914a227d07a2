//! A test tool that reports what its `[plugins.<name>]` grants give it.
//! Built twice under two names (`grant_probe`, `grant_bystander`, from the
//! package name), so a test can show that one plugin's grants reach that
//! plugin only. Arguments, one of:
//! - `{"get": URL, "auth_env": NAME?}`: an HTTP GET through
//!   `wasi:http/outgoing-handler`, with `Authorization: Bearer $NAME` when
//!   asked; answers `status N: BODY`, or fails with the host's refusal;
//! - `{"env": NAME}`: whether the variable is set and its length (never its
//!   value, so a secret can be checked without being echoed);
//! - `{"config": KEY}`: the value of a `config` setting, or `(unset)`.

use agentd_tool_sdk::{Error, ErrorCode, Guest, Metadata, ToolSpec, config, export_tool};

mod http {
    wit_bindgen::generate!({
        inline: "
            package agentd:grant-probe;

            world http {
                import wasi:http/outgoing-handler@0.2.12;
            }
        ",
        path: "../../../wit/since_v0.2.2",
        generate_all,
    });
}

use http::wasi::http::outgoing_handler;
use http::wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use http::wasi::io::streams::StreamError;

const NAME: &str = env!("CARGO_PKG_NAME");

struct GrantProbe;

impl Guest for GrantProbe {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            "Reports what its grants give it.",
        )
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(
            NAME,
            "Reports what its grants give it.",
            r#"{"type":"object","properties":{"get":{"type":"string"},"auth_env":{"type":"string"},"env":{"type":"string"},"config":{"type":"string"}}}"#,
        )
    }

    fn invoke(arguments: String) -> Result<String, Error> {
        let args: serde_json::Value = serde_json::from_str(&arguments)
            .map_err(|e| Error::new(ErrorCode::InvalidInput, format!("bad arguments: {e}")))?;
        let text = |key: &str| args.get(key).and_then(|v| v.as_str()).map(str::to_string);
        if let Some(url) = text("get") {
            let auth = text("auth_env").and_then(|name| std::env::var(name).ok());
            return get(&url, auth.as_deref()).map_err(Error::failed);
        }
        if let Some(name) = text("env") {
            return Ok(match std::env::var(&name) {
                Ok(v) => format!("{name} is set ({} bytes)", v.len()),
                Err(_) => format!("{name} is not set"),
            });
        }
        if let Some(key) = text("config") {
            return Ok(config::get(&key).unwrap_or_else(|| "(unset)".into()));
        }
        Err(Error::new(
            ErrorCode::InvalidInput,
            "give get, env or config",
        ))
    }
}

/// A blocking GET of `url` (`http://host:port/path` only: enough for tests).
fn get(url: &str, bearer: Option<&str>) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("only http:// URLs, not {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let headers = Fields::new();
    if let Some(token) = bearer {
        headers
            .append("authorization", format!("Bearer {token}").as_bytes())
            .map_err(|e| format!("header: {e:?}"))?;
    }
    let request = OutgoingRequest::new(headers);
    request.set_method(&Method::Get).map_err(|()| "method")?;
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| "scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "authority")?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| "path")?;
    let body = request.body().map_err(|()| "body")?;
    OutgoingBody::finish(body, None).map_err(|e| format!("finish: {e:?}"))?;
    let pending = outgoing_handler::handle(request, None).map_err(describe)?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or("no response after the wait")?
        .map_err(|()| "response taken twice")?
        .map_err(describe)?;
    let status = response.status();
    let incoming = response.consume().map_err(|()| "body taken twice")?;
    let stream = incoming.stream().map_err(|()| "stream taken twice")?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!("reading the body: {}", e.to_debug_string()));
            }
        }
    }
    Ok(format!(
        "status {status}: {}",
        String::from_utf8_lossy(&bytes)
    ))
}

/// The host's error code as text; `internal-error` carries agentd's own
/// message (a refused host says which key to change).
fn describe(e: http::wasi::http::types::ErrorCode) -> String {
    use http::wasi::http::types::ErrorCode as E;
    match e {
        E::InternalError(Some(message)) => message,
        other => format!("{other:?}"),
    }
}

export_tool!(GrantProbe);
