//! A test tool built three times from this one source: `versioned_v1` and
//! `versioned_v2` are the same plugin (`versioned`) at two versions, so the
//! host's hot reload can be tested by swapping one file for the other;
//! `versioned_bad` (feature `empty-version`) reports an empty version, which
//! the host must refuse. The version is the building crate's own, so each
//! build is reproducible and none needs environment tricks.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool};

const NAME: &str = "versioned";
const DESCRIPTION: &str = "Returns its own version.";
const PARAMETERS: &str = r#"{"type":"object","properties":{}}"#;
const VERSION: &str = if cfg!(feature = "empty-version") {
    ""
} else {
    env!("CARGO_PKG_VERSION")
};

struct Versioned;

impl Guest for Versioned {
    fn metadata() -> Metadata {
        Metadata::new(NAME, VERSION, DESCRIPTION)
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, DESCRIPTION, PARAMETERS)
    }

    fn invoke(_arguments: String) -> Result<String, Error> {
        Ok(format!("versioned {VERSION}"))
    }
}

export_tool!(Versioned);
