//! `agentd plugin install FILE.wasm` and `agentd plugin remove NAME`, through
//! the daemon's API (`PUT` and `DELETE /v1/plugins/{name}`): the daemon
//! checks, writes and loads the file, so a user allowed on the socket
//! installs without write access to the plugins folder.

use super::{InstallArgs, RemoveArgs};
use crate::cli::client::{path_segment, Client, ClientError};
use crate::plugin::PluginStatus;

pub async fn install(client: &Client, args: &InstallArgs) -> Result<i32, ClientError> {
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("agentd: cannot read {}: {e}", args.file.display());
            return Ok(crate::cli::exit::USAGE);
        }
    };
    let path = format!("/v1/plugins/{}", path_segment(&name));
    let answer: serde_json::Value = client.put_bytes(&path, bytes).await?;
    if args.json {
        println!("{answer:#}");
        return Ok(0);
    }
    let status: PluginStatus = crate::cli::client::from_value("the installed plugin", &answer)?;
    println!(
        "installed {} {} ({}) as {}",
        status.name,
        status.version.as_deref().unwrap_or("?"),
        status
            .kind
            .map(|k| format!("{k:?}").to_lowercase())
            .unwrap_or_default(),
        status.file.display()
    );
    Ok(0)
}

pub async fn remove(client: &Client, args: &RemoveArgs) -> Result<i32, ClientError> {
    let path = format!("/v1/plugins/{}", path_segment(&args.name));
    let answer: serde_json::Value = client.delete(&path).await?;
    if args.json {
        println!("{answer:#}");
        return Ok(0);
    }
    let status: PluginStatus = crate::cli::client::from_value("the removed plugin", &answer)?;
    println!("removed {} ({})", status.name, status.file.display());
    Ok(0)
}
