//! `[plugins.<name>]` tables into the plugin host's [`Grants`], with the
//! secret values read from where they may be kept: a systemd credential
//! (`LoadCredential=NAME:PATH`, read from `$CREDENTIALS_DIRECTORY/NAME`),
//! else the secrets file (`[plugins] secrets_file`, default `secrets.env`
//! next to the configuration file), which must be readable by its owner
//! only (root or the daemon's user). Never from the configuration file
//! itself: that one may be world-readable, and is shown to whoever asks.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{PluginGrantKeys, PluginsKeys};
use crate::plugin::{AllowList, Grants, PluginGrant, PluginSettings, Secret};

/// The secrets file's name when `[plugins] secrets_file` is not set, next
/// to the configuration file.
pub const DEFAULT_SECRETS_FILE: &str = "secrets.env";

/// The grants of every `[plugins.<name>]` table, checked against
/// `settings` (a plugin's memory limit may not pass the pool's), with the
/// secrets read when `read_secrets` (only what runs plugins needs them: the
/// daemon, `run --local`, `plugin call`; a client reading the file for its
/// socket must not touch them, and usually cannot). The error names the
/// table and key first (`[plugins.x] key`) so the caller can find its line.
pub fn build(
    keys: &PluginsKeys,
    settings: &PluginSettings,
    config_dir: Option<&Path>,
    read_secrets: bool,
) -> Result<Grants, String> {
    let secrets_file = secrets_file(keys, config_dir);
    let mut store = read_secrets.then(|| SecretStore::new(secrets_file));
    let mut out = BTreeMap::new();
    for (name, k) in &keys.grants {
        out.insert(name.clone(), grant(name, k, settings, store.as_mut())?);
    }
    Ok(Grants::new(out))
}

fn grant(
    name: &str,
    k: &PluginGrantKeys,
    settings: &PluginSettings,
    secrets: Option<&mut SecretStore>,
) -> Result<PluginGrant, String> {
    let table = format!("[plugins.{name}]");
    let allow_hosts = AllowList::parse(k.allow_hosts.iter().map(String::as_str))
        .map_err(|e| format!("{table} allow_hosts: {e}"))?;
    for var in k.env.keys().chain(k.secrets.iter()) {
        if !is_env_name(var) {
            return Err(format!(
                "{table} env and secrets: {var:?} is not an environment variable name (letters, digits and `_`, not starting with a digit)"
            ));
        }
    }
    if let Some(both) = k.secrets.iter().find(|s| k.env.contains_key(*s)) {
        return Err(format!(
            "{table} secrets: {both} is also in env; a variable is either plain or secret"
        ));
    }
    let mut config = BTreeMap::new();
    for (key, value) in &k.config {
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                value.to_string()
            }
            _ => {
                return Err(format!(
                    "{table} config: `{key}` must be a string, number or boolean (the config interface reads plain text)"
                ))
            }
        };
        config.insert(key.clone(), text);
    }
    let memory_limit = match &k.memory_limit {
        None => None,
        Some(size) => {
            let bytes = size.bytes(&format!("{table} memory_limit"))?;
            if bytes < crate::plugin::settings::MIN_MEMORY_LIMIT || bytes > settings.memory_limit {
                return Err(format!(
                    "{table} memory_limit must be between {} and [plugins] memory_limit ({}), which sizes the instance pool; raise that to give one plugin more",
                    crate::plugin::settings::show_bytes(crate::plugin::settings::MIN_MEMORY_LIMIT),
                    crate::plugin::settings::show_bytes(settings.memory_limit)
                ));
            }
            Some(bytes)
        }
    };
    let timeout = match k.timeout {
        None => None,
        Some(t) => Some(
            Duration::try_from_secs_f64(t)
                .ok()
                .filter(|d| !d.is_zero() && *d <= Duration::from_secs(24 * 3600))
                .ok_or_else(|| {
                    format!("{table} timeout must be a positive number of seconds (at most a day), not {t}")
                })?,
        ),
    };
    let mut secret_values = BTreeMap::new();
    if let Some(secrets) = secrets {
        for var in &k.secrets {
            let value = secrets
                .get(var)
                .map_err(|why| format!("{table} secrets: {var}: {why}"))?;
            secret_values.insert(var.clone(), value);
        }
    }
    Ok(PluginGrant {
        allow_hosts,
        env: k.env.clone(),
        secrets: secret_values,
        config,
        memory_limit,
        timeout,
    })
}

pub(super) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn secrets_file(keys: &PluginsKeys, config_dir: Option<&Path>) -> Option<PathBuf> {
    let path = keys
        .secrets_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SECRETS_FILE));
    if path.is_absolute() {
        Some(path)
    } else {
        config_dir.map(|d| d.join(path))
    }
}

/// Where secret values come from, the secrets file read (and checked) at
/// most once per load.
pub(super) struct SecretStore {
    credentials: Option<PathBuf>,
    file: Option<PathBuf>,
    parsed: Option<Result<BTreeMap<String, String>, String>>,
}

impl SecretStore {
    pub(super) fn new(file: Option<PathBuf>) -> Self {
        SecretStore {
            credentials: std::env::var_os("CREDENTIALS_DIRECTORY")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            file,
            parsed: None,
        }
    }

    /// `name`'s value: its systemd credential if there is one, else its
    /// line in the secrets file.
    pub(super) fn get(&mut self, name: &str) -> Result<Secret, String> {
        if let Some(dir) = &self.credentials {
            let path = dir.join(name);
            if path.exists() {
                return std::fs::read_to_string(&path)
                    .map(|v| Secret::new(v.trim_end_matches(['\n', '\r']).to_string()))
                    .map_err(|e| format!("cannot read the credential {}: {e}", path.display()));
            }
        }
        let Some(file) = self.file.clone() else {
            return Err("no secrets file: the configuration has no folder to find secrets.env in; set [plugins] secrets_file".into());
        };
        let parsed = self.parsed.get_or_insert_with(|| read_secrets_file(&file));
        let values = parsed.as_ref().map_err(Clone::clone)?;
        match values.get(name) {
            Some(v) => Ok(Secret::new(v.clone())),
            None => Err(format!(
                "not found: it is neither a systemd credential ($CREDENTIALS_DIRECTORY/{name}, LoadCredential={name}:PATH) nor a `{name}=...` line in {}",
                file.display()
            )),
        }
    }
}

/// `NAME=value` lines; blank lines and `#` comments skipped; the value as
/// is after the first `=` (no quotes, no escapes). The file must be owned
/// by root or this process's user, and neither its group nor others may
/// read or write it.
fn read_secrets_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot open the secrets file {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat the secrets file {shown}: {e}"))?;
    let me = crate::plugin::trust::euid();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(format!(
            "the secrets file {shown} is owned by uid {}, not root or this daemon's user (uid {me}); chown it",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the secrets file {shown} has mode {:o}: others than its owner can read or write it; chmod 600 it",
            meta.mode() & 0o7777
        ));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("cannot read the secrets file {shown}: {e}"))?;
    let mut values = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("{shown}:{}: not a `NAME=value` line", n + 1));
        };
        values.insert(name.trim().to_string(), value.to_string());
    }
    Ok(values)
}
