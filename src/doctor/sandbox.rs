//! `docker` and `image`: the engine answers, and the sandbox image has what
//! the bundled tools run.

use std::time::Duration;

use super::{Check, ANSWER_WITHIN};
use crate::sandbox::docker::DockerSandboxProvider;
use crate::sandbox::{CommandSpec, Sandbox, SandboxConfig, SandboxError};

/// How long the probe command in the sandbox may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Prints `NAME=PATH` (an empty path when missing) for each program the
/// bundled tools run: `bash` for `bash`, `python3` for `python_execute`.
const PROBE: &str =
    r#"for p in bash python3; do printf '%s=%s\n' "$p" "$(command -v "$p" 2>/dev/null)"; done"#;

/// `docker` and `image` together: the image is checked on the engine the
/// first found, and skipped without one.
pub(super) async fn check_sandbox(config: &SandboxConfig) -> (Check, Check) {
    let no_engine = || {
        Check::fail(
            "image",
            format!("{}: skipped: no Docker engine", config.image),
            "fix the docker check first",
        )
    };
    let provider = match DockerSandboxProvider::new(config) {
        Ok(p) => p,
        Err(e) => {
            return (
                Check::fail(
                    "docker",
                    sandbox_message(&e),
                    "correct [sandbox] in the configuration",
                ),
                no_engine(),
            )
        }
    };
    let docker = match provider.docker().await {
        Ok(d) => d,
        Err(e) => {
            let message = sandbox_message(&e);
            let fix = docker_fix(&message);
            return (Check::fail("docker", message, fix), no_engine());
        }
    };
    let address = provider.engine_address();
    let docker_check = match tokio::time::timeout(ANSWER_WITHIN, docker.version()).await {
        Ok(Ok(v)) => {
            let mut detail = format!(
                "{address}, Docker {} (API {})",
                v.version.as_deref().unwrap_or("?"),
                v.api_version.as_deref().unwrap_or("?")
            );
            // Each is logged (at the warn level) when the engine is first
            // reached: they weaken the sandbox, but runs work.
            match provider.isolation_warnings().len() {
                0 => {}
                1 => detail.push_str("; 1 isolation warning (logged)"),
                n => detail.push_str(&format!("; {n} isolation warnings (logged)")),
            }
            Check::pass("docker", detail)
        }
        Ok(Err(e)) => {
            let message = format!("the Docker engine at {address} did not give its version: {e}");
            let fix = docker_fix(&message);
            return (Check::fail("docker", message, fix), no_engine());
        }
        Err(_) => {
            return (
                Check::fail(
                    "docker",
                    format!(
                        "the Docker engine at {address} did not answer within {} s",
                        ANSWER_WITHIN.as_secs()
                    ),
                    docker_fix(""),
                ),
                no_engine(),
            )
        }
    };
    (docker_check, check_image(&provider, &docker, config).await)
}

/// `engine NAME` for each `[[sandbox.engines]]` entry after the first
/// (which `docker` and `image` cover): it answers and has the image. All at
/// once, each bounded.
pub(super) async fn check_other_engines(config: &SandboxConfig) -> Vec<Check> {
    let others = config.engines.iter().skip(1).map(|entry| async move {
        let name = format!("engine {}", entry.name);
        let provider = match DockerSandboxProvider::for_engine(config, entry, None) {
            Ok(p) => p,
            Err(e) => {
                return Check::fail(
                    &name,
                    sandbox_message(&e),
                    "correct its [[sandbox.engines]] entry",
                )
            }
        };
        let address = provider.engine_address().to_string();
        let answered = tokio::time::timeout(ANSWER_WITHIN, async {
            let docker = provider.docker().await.map_err(|e| sandbox_message(&e))?;
            docker
                .inspect_image(&config.image)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    bollard::errors::Error::DockerResponseServerError {
                        status_code: 404, ..
                    } => format!("{} is not on the Docker engine at {address}", config.image),
                    other => format!("cannot inspect {} at {address}: {other}", config.image),
                })
        })
        .await;
        match answered {
            Ok(Ok(())) => Check::pass(&name, format!("{address}, {} present", config.image)),
            Ok(Err(message)) => {
                let fix = if message.contains("is not on the Docker engine") {
                    "load it there: docker save IMAGE | docker -H ADDRESS load (agentd never pulls images)".to_string()
                } else {
                    "start that engine or correct its docker_host and TLS files".to_string()
                };
                Check::fail(&name, message, fix)
            }
            Err(_) => Check::fail(
                &name,
                format!(
                    "the Docker engine at {address} did not answer within {} s",
                    ANSWER_WITHIN.as_secs()
                ),
                "start that engine or correct its docker_host",
            ),
        }
    });
    futures::future::join_all(others).await
}

fn sandbox_message(e: &SandboxError) -> String {
    match e {
        SandboxError::Unavailable(m) | SandboxError::Failed(m) => m.clone(),
    }
}

fn docker_fix(message: &str) -> String {
    if message.to_ascii_lowercase().contains("permission denied") {
        "let this user reach the engine: sudo usermod -aG docker $USER, then log in again (or set [sandbox] docker_host)".into()
    } else {
        "start the engine (scripts/ensure-docker.sh), or set [sandbox] docker_host to where it listens".into()
    }
}

async fn check_image(
    provider: &DockerSandboxProvider,
    docker: &bollard::Docker,
    config: &SandboxConfig,
) -> Check {
    let image = &config.image;
    let address = provider.engine_address();
    match docker.inspect_image(image).await {
        Ok(_) => {}
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Check::fail(
            "image",
            format!("{image} is not on the Docker engine at {address}"),
            "build it: scripts/build-images.sh (agentd never pulls images), or set [sandbox] image",
        ),
        Err(e) => {
            return Check::fail(
                "image",
                format!("cannot inspect {image} on the engine at {address}: {e}"),
                docker_fix(&e.to_string()),
            )
        }
    }
    // A sandbox as a run gets one (labels, limits, user), so what works
    // here works in a run; destroyed whatever the probe did.
    let run_id = format!("doctor-{}", uuid::Uuid::new_v4().simple());
    let sandbox = provider.sandbox(&run_id);
    let probed = sandbox
        .run(CommandSpec {
            command: PROBE.into(),
            workdir: None,
            timeout: Some(PROBE_TIMEOUT),
            stdin: None,
        })
        .await;
    sandbox.destroy().await;
    let output = match probed {
        Ok(o) => o,
        Err(e) => {
            return Check::fail(
                "image",
                format!("cannot run a command in a sandbox from {image}: {}", sandbox_message(&e)),
                "check [sandbox] (user, limits) against the image, or rebuild it: scripts/build-images.sh",
            )
        }
    };
    let found = probe_paths(&output.stdout);
    let missing: Vec<&str> = found
        .iter()
        .filter(|(_, path)| path.is_empty())
        .map(|(name, _)| *name)
        .collect();
    if output.exit_code != 0 || found.len() != 2 {
        return Check::fail(
            "image",
            format!(
                "the probe in a sandbox from {image} failed (exit {}): {}",
                output.exit_code,
                output.stderr.trim()
            ),
            "rebuild the image: scripts/build-images.sh",
        );
    }
    if !missing.is_empty() {
        return Check::fail(
            "image",
            format!("{image} has no {}", missing.join(" and no ")),
            "rebuild the image (scripts/build-images.sh), or set [sandbox] image to one with bash and python3",
        );
    }
    let paths: Vec<&str> = found.iter().map(|(_, p)| p.as_str()).collect();
    Check::pass("image", format!("{image} (has {})", paths.join(", ")))
}

/// `bash=/bin/bash` lines, as [`PROBE`] prints them.
fn probe_paths(stdout: &str) -> Vec<(&'static str, String)> {
    ["bash", "python3"]
        .into_iter()
        .filter_map(|name| {
            stdout.lines().find_map(|line| {
                let path = line.strip_prefix(name)?.strip_prefix('=')?;
                Some((name, path.trim().to_string()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_output_names_each_program_or_none() {
        assert_eq!(
            probe_paths("bash=/bin/bash\npython3=\n"),
            vec![("bash", "/bin/bash".into()), ("python3", String::new())]
        );
        assert_eq!(probe_paths("garbage"), vec![]);
    }
}
