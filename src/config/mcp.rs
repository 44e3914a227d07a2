//! `[mcp.<server>]` tables into the MCP client's [`McpSettings`], with the
//! secrets read from where plugin secrets are kept (systemd credentials,
//! else the secrets file): never from the configuration file itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::file::{McpServerKeys, PluginsKeys};
use super::grants::{is_env_name, secrets_file, SecretStore};
use crate::mcp::names::is_valid_server_name;
use crate::mcp::settings::{DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT};
use crate::mcp::{McpSettings, ServerSettings, Transport};
use crate::plugin::Secret;

/// Every `[mcp.<server>]` table, the secrets read when `read_secrets` (as
/// for the plugin grants: only what starts servers reads them). The error
/// names the table and key first (`[mcp.x] key`).
pub fn build(
    tables: &BTreeMap<String, McpServerKeys>,
    plugins: &PluginsKeys,
    config_dir: Option<&Path>,
    read_secrets: bool,
) -> Result<McpSettings, String> {
    let mut store = read_secrets.then(|| SecretStore::new(secrets_file(plugins, config_dir)));
    let mut servers = BTreeMap::new();
    for (name, keys) in tables {
        servers.insert(
            name.clone(),
            server(name, keys, config_dir, store.as_mut())?,
        );
    }
    Ok(McpSettings { servers })
}

fn seconds(
    table: &str,
    key: &str,
    value: Option<f64>,
    default: Duration,
) -> Result<Duration, String> {
    match value {
        None => Ok(default),
        Some(t) => Duration::try_from_secs_f64(t)
            .ok()
            .filter(|d| !d.is_zero() && *d <= Duration::from_secs(24 * 3600))
            .ok_or_else(|| {
                format!(
                    "{table} {key} must be a positive number of seconds (at most a day), not {t}"
                )
            }),
    }
}

fn server(
    name: &str,
    k: &McpServerKeys,
    config_dir: Option<&Path>,
    mut store: Option<&mut SecretStore>,
) -> Result<ServerSettings, String> {
    let table = format!("[mcp.{name}]");
    if !is_valid_server_name(name) {
        return Err(format!(
            "{table} is not a valid server name: letters, digits, `_` and `-` (no `__`), at most 32 (it becomes part of the names the model sees)"
        ));
    }
    for var in &k.secrets {
        if !is_env_name(var) {
            return Err(format!(
                "{table} secrets: {var:?} is not a variable name (letters, digits and `_`, not starting with a digit)"
            ));
        }
    }
    let mut secret = |var: &str| -> Result<Secret, String> {
        match store.as_deref_mut() {
            Some(s) => s
                .get(var)
                .map_err(|why| format!("{table} secrets: {var}: {why}")),
            // Not read here (a client reading the file): never used.
            None => Ok(Secret::new(String::new())),
        }
    };
    let transport = match (&k.command, &k.url) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(format!(
                "{table} command: give either `command` (a stdio server) or `url` (Streamable HTTP), not both or neither"
            ))
        }
        (Some(command), None) => {
            if !k.headers.is_empty() {
                return Err(format!(
                    "{table} headers: only a `url` server takes headers; a stdio server takes `env`"
                ));
            }
            if command.is_empty() {
                return Err(format!("{table} command is empty"));
            }
            let mut env = BTreeMap::new();
            for (var, value) in &k.env {
                if !is_env_name(var) {
                    return Err(format!(
                        "{table} env: {var:?} is not an environment variable name"
                    ));
                }
                env.insert(var.clone(), Secret::new(value.clone()));
            }
            for var in &k.secrets {
                if k.env.contains_key(var) {
                    return Err(format!(
                        "{table} secrets: {var} is also in env; a variable is either plain or secret"
                    ));
                }
                env.insert(var.clone(), secret(var)?);
            }
            let cwd = k.cwd.as_ref().map(|d| match config_dir {
                Some(base) if d.is_relative() => base.join(d),
                _ => d.clone(),
            });
            Transport::Stdio {
                command: command.clone(),
                args: k.args.clone(),
                env,
                cwd,
            }
        }
        (None, Some(url)) => {
            if !k.args.is_empty() || !k.env.is_empty() || k.cwd.is_some() {
                return Err(format!(
                    "{table} url: `args`, `env` and `cwd` are for a stdio server (`command`); an HTTP server takes `headers`"
                ));
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "{table} url must start with http:// or https://, not {url:?}"
                ));
            }
            let mut headers = BTreeMap::new();
            for (header, value) in &k.headers {
                let value = substitute(value, |var| {
                    if !k.secrets.iter().any(|s| s == var) {
                        return Err(format!(
                            "{table} headers: {header} uses ${{{var}}}, which is not in this table's secrets"
                        ));
                    }
                    secret(var)
                })?;
                headers.insert(header.clone(), value);
            }
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
    };
    if let Some(tools) = &k.tools {
        if tools.iter().any(String::is_empty) {
            return Err(format!("{table} tools: a tool name is empty"));
        }
    }
    Ok(ServerSettings {
        name: name.to_string(),
        transport,
        enabled: k.enabled.unwrap_or(true),
        timeout: seconds(&table, "timeout", k.timeout, DEFAULT_CALL_TIMEOUT)?,
        start_timeout: seconds(
            &table,
            "start_timeout",
            k.start_timeout,
            DEFAULT_START_TIMEOUT,
        )?,
        tools: k.tools.clone(),
        per_run: k.per_run.unwrap_or(false),
    })
}

/// `value` with each `${NAME}` replaced by `lookup(NAME)`; the result is
/// kept as a secret, since it may hold one.
fn substitute(
    value: &str,
    mut lookup: impl FnMut(&str) -> Result<Secret, String>,
) -> Result<Secret, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        out.push_str(lookup(&after[..end])?.expose());
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Secret::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution() {
        let got = substitute("Bearer ${T} and ${U}", |v| {
            Ok(Secret::new(format!("<{v}>")))
        })
        .unwrap();
        assert_eq!(got.expose(), "Bearer <T> and <U>");
        assert_eq!(
            substitute("no ${ end", |_| Err("x".into()))
                .unwrap()
                .expose(),
            "no ${ end"
        );
        assert!(substitute("${X}", |_| Err("nope".into())).is_err());
    }
}
