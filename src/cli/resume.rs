//! `agentd resume RUN [--steps N]`: a new run that continues an ended one
//! (`POST /v1/runs/{id}/resume`), followed like `agentd run` follows its
//! run, with the same output and exit statuses.

use serde_json::Value;

use super::client::{from_value, path_segment, Client, ClientError};
use super::remote_run::{follow_created, refuses_the_input};
use super::runs::fetch_run;
use super::{exit, ResumeArgs};
use crate::api::{ResumeRun, RunView};

pub async fn resume(client: &Client, args: &ResumeArgs) -> Result<i32, ClientError> {
    // The daemon wants the whole id; a prefix from `agentd runs` is found
    // the way `show` finds it.
    let old: RunView = from_value("the run", &fetch_run(client, &args.run).await?)?;
    let path = format!("/v1/runs/{}/resume", path_segment(&old.summary.id));
    let ask = ResumeRun {
        steps: args.steps,
        files: args.no_files.then_some(false),
    };
    let created: Value = match client.post(&path, &ask).await {
        Ok(v) => v,
        Err(e) if refuses_the_input(&e) => {
            eprintln!("agentd: {e}");
            return Ok(exit::USAGE);
        }
        Err(e) => return Err(e),
    };
    follow_created(client, created, args.json, args.detach).await
}
