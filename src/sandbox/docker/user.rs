//! Who the model's commands run as (`[sandbox] user`), as numbers.
//!
//! agentd needs the numeric uid and gid before the container exists: the
//! work dir's tmpfs is mounted with `uid=`/`gid=` so that the sandbox user
//! owns it (git, for one, refuses a repository in a folder someone else
//! owns), and files uploaded through the archive API carry them in their
//! tar headers (the engine's own `copyUIDGID` looks names up in the
//! *host's* passwd). A numeric `uid[:gid]` needs nothing more, which is how
//! an image without the `sandbox` user (`python:3.12-slim`) is used; a name
//! is looked up once in the image's own `/etc/passwd` (and `/etc/group`),
//! read from a container that is created for it and never started.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};
use bollard::Docker;

use super::container::{self, LABEL_MANAGED, LABEL_RUN};
use super::engine::OpError;
use super::exec::Target;
use super::files;
use crate::sandbox::SandboxError;

/// The ids a command runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ids {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Ids {
    /// The `User` of an exec: numbers, so the engine never has to look a
    /// name up again and every exec runs as exactly what the tmpfs and the
    /// tar headers were given.
    pub(crate) fn exec_user(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }
}

/// `[sandbox] user` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UserSpec {
    /// Known without looking at the image.
    Ids(Ids),
    /// A name (of the user, of the group, or both) to look up in the image.
    Lookup { user: String, group: Option<String> },
}

/// The run label of the throw-away container a lookup reads the image
/// through (the orphan reaper removes it if the daemon dies mid-lookup).
pub(crate) const LOOKUP_RUN: &str = "agentd-user-lookup";
/// The largest `/etc/passwd` or `/etc/group` read.
const MAX_DB_BYTES: u64 = 1 << 20;

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'))
}

/// Parses `[sandbox] user`: `name`, `name:group`, `uid`, `uid:gid` (or a
/// mix), or `root`. A uid alone also serves as the gid.
pub(crate) fn parse(text: &str) -> Result<UserSpec, String> {
    let t = text.trim();
    let bad = |why: &str| format!("invalid [sandbox] user `{text}`: {why}");
    if t.is_empty() {
        return Err(bad(
            "it is empty; name a user of the image, give a numeric uid:gid such as 1000:1000, \
             or write root to run commands as root",
        ));
    }
    let (user, group) = match t.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (t, None),
    };
    for part in std::iter::once(user).chain(group) {
        if !valid_name(part) {
            return Err(bad(
                "expected a user name or number, optionally followed by `:` and a group name \
                 or number",
            ));
        }
    }
    let uid = user.parse::<u32>().ok();
    if uid == Some(0) {
        // Root in the sandbox is root on the host for any escape: it must
        // be asked for by name, not reached by a number.
        return Err(bad(
            "uid 0 is root; write `root` to run commands as root, so that it is explicit",
        ));
    }
    let gid = group.and_then(|g| g.parse::<u32>().ok());
    Ok(match (uid, group, gid) {
        (Some(uid), None, _) => UserSpec::Ids(Ids { uid, gid: uid }),
        (Some(uid), Some(_), Some(gid)) => UserSpec::Ids(Ids { uid, gid }),
        _ if user == "root" && group.is_none() => UserSpec::Ids(Ids { uid: 0, gid: 0 }),
        _ => UserSpec::Lookup {
            user: user.to_string(),
            group: group.map(str::to_string),
        },
    })
}

/// The `(name, id, primary gid)` of each line of a passwd or group file.
fn entries(db: &str) -> impl Iterator<Item = (&str, u32, Option<u32>)> {
    db.lines().filter_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let _password = f.next()?;
        let id = f.next()?.trim().parse().ok()?;
        let primary = f.next().and_then(|g| g.trim().parse().ok());
        Some((name, id, primary))
    })
}

/// Resolves a [`UserSpec::Lookup`] against the image's `passwd` and
/// `group` (`None` when the image has no such file).
fn resolve_in(
    user: &str,
    group: Option<&str>,
    passwd: Option<&str>,
    groups: Option<&str>,
    image: &str,
) -> Result<Ids, String> {
    let hint = "a numeric `user = \"1000:1000\"` needs no entry in the image";
    let (uid, primary) = match user.parse::<u32>() {
        Ok(uid) => (uid, None),
        Err(_) => {
            let found = passwd.and_then(|p| entries(p).find(|(n, _, _)| *n == user));
            let Some((_, uid, primary)) = found else {
                let whence = if passwd.is_some() {
                    "is not in /etc/passwd"
                } else {
                    "cannot be looked up: there is no /etc/passwd"
                };
                return Err(format!(
                    "[sandbox] user `{user}` {whence} of image `{image}`; build the image with \
                     scripts/build-images.sh (which adds the `sandbox` user), or use {hint}"
                ));
            };
            (uid, primary)
        }
    };
    let gid = match group {
        None => primary.ok_or_else(|| {
            format!("[sandbox] user `{user}` has no primary group in /etc/passwd of image `{image}`; use {hint}")
        })?,
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => groups
                .and_then(|db| entries(db).find(|(n, _, _)| *n == g))
                .map(|(_, gid, _)| gid)
                .ok_or_else(|| {
                    format!(
                        "[sandbox] user `{user}:{g}`: group `{g}` is not in /etc/group of image \
                         `{image}`; use {hint}"
                    )
                })?,
        },
    };
    Ok(Ids { uid, gid })
}

/// Looks `user`/`group` up in the image's own files, through a container
/// created for the purpose and removed again (never started: the archive
/// API reads a created container's filesystem).
pub(crate) async fn lookup(
    docker: &Docker,
    image: &str,
    user: &str,
    group: Option<&str>,
    owner_label: &str,
    engine: &str,
) -> Result<Ids, SandboxError> {
    let labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "true".to_string()),
        (LABEL_RUN.to_string(), LOOKUP_RUN.to_string()),
        (
            super::owner::LABEL_OWNER.to_string(),
            owner_label.to_string(),
        ),
    ]);
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec!["true".into()]),
        cmd: Some(Vec::new()),
        labels: Some(labels),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            body,
        )
        .await
        .map_err(|e| container::create_error(&e, image, engine))?;
    let t = Target {
        docker,
        container: &created.id,
        user: "",
    };
    let read = |path: &'static str| async move {
        match files::read(t, "/", path, MAX_DB_BYTES).await {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(OpError::Msg(m)) if m.contains("no such file") => Ok(None),
            Err(e) => Err(e.classify(engine, image).0),
        }
    };
    let passwd = read("/etc/passwd").await;
    let groups = match (&passwd, group) {
        (Ok(_), Some(g)) if g.parse::<u32>().is_err() => read("/etc/group").await,
        _ => Ok(None),
    };
    if let Err(e) = container::remove(docker, &created.id).await {
        tracing::warn!(container = %created.id, error = %e, "cannot remove the user lookup container; the orphan reaper will");
    }
    let ids = resolve_in(user, group, passwd?.as_deref(), groups?.as_deref(), image)
        .map_err(SandboxError::Unavailable)?;
    tracing::debug!(
        user,
        uid = ids.uid,
        gid = ids.gid,
        image,
        "looked up the sandbox user"
    );
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(uid: u32, gid: u32) -> UserSpec {
        UserSpec::Ids(Ids { uid, gid })
    }

    #[test]
    fn parses_users() {
        assert_eq!(parse("1000:1000"), Ok(ids(1000, 1000)));
        assert_eq!(parse(" 1000 "), Ok(ids(1000, 1000)));
        assert_eq!(parse("1000:50"), Ok(ids(1000, 50)));
        assert_eq!(parse("root"), Ok(ids(0, 0)));
        for zero in ["0", "0:0", "0:1000"] {
            let e = parse(zero).expect_err("uid 0 by number");
            assert!(e.contains("write `root`"), "{e}");
        }
        assert_eq!(
            parse("sandbox"),
            Ok(UserSpec::Lookup {
                user: "sandbox".into(),
                group: None
            })
        );
        assert_eq!(
            parse("1000:staff"),
            Ok(UserSpec::Lookup {
                user: "1000".into(),
                group: Some("staff".into())
            })
        );
        for bad in ["", "  ", "a b", "a:", ":a", "a:b:c", "x;rm"] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains("[sandbox] user"), "{e}");
        }
    }

    #[test]
    fn resolves_in_the_image_files() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/workspace:/bin/sh\n";
        let group = "root:x:0:\nstaff:x:50:\n";
        let r = |u, g| resolve_in(u, g, Some(passwd), Some(group), "img");
        assert_eq!(
            r("sandbox", None),
            Ok(Ids {
                uid: 1000,
                gid: 1000
            })
        );
        assert_eq!(r("sandbox", Some("staff")), Ok(Ids { uid: 1000, gid: 50 }));
        assert_eq!(r("1000", Some("staff")), Ok(Ids { uid: 1000, gid: 50 }));
        let e = r("nobody", None).expect_err("missing");
        assert!(e.contains("not in /etc/passwd of image `img`"), "{e}");
        assert!(e.contains("1000:1000"), "{e}");
        assert!(r("sandbox", Some("wheel")).is_err());
        let e = resolve_in("sandbox", None, None, None, "python:3.12-slim").expect_err("none");
        assert!(e.contains("no /etc/passwd"), "{e}");
    }
}
