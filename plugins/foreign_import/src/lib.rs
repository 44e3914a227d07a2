//! A tool that imports `example:elsewhere/clock@1.0.0`, an interface agentd
//! does not provide, and calls it, so the import stays in the component.
//! Loading it must fail with that import named.

use agentd_tool_sdk::{Error, Guest, Metadata, ToolSpec, export_tool};

mod elsewhere {
    wit_bindgen::generate!({
        inline: "
            package example:elsewhere@1.0.0;

            interface clock {
                now: func() -> u64;
            }

            world needs {
                import clock;
            }
        ",
    });
}

const NAME: &str = "foreign_import";

struct ForeignImport;

impl Guest for ForeignImport {
    fn metadata() -> Metadata {
        Metadata::new(
            NAME,
            env!("CARGO_PKG_VERSION"),
            "Imports what agentd lacks.",
        )
    }

    fn spec() -> ToolSpec {
        ToolSpec::new(NAME, "Imports what agentd lacks.", r#"{"type":"object"}"#)
    }

    fn invoke(_arguments: String) -> Result<String, Error> {
        Ok(elsewhere::example::elsewhere::clock::now().to_string())
    }
}

export_tool!(ForeignImport);
