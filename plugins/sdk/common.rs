// Shared by both SDK crates through `include!`: each crate generates its own
// copy of the `types` interface, so the impls cannot live in one crate.

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }
}

impl Metadata {
    /// Pass `env!("CARGO_PKG_VERSION")` as the version: it has to expand in
    /// the plugin's crate to give the plugin's version, not the SDK's.
    pub fn new(
        name: impl Into<String>,
        version: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Metadata {
            name: name.into(),
            version: version.into(),
            description: description.into(),
        }
    }
}

/// Logging through the host, which tags each line with the plugin's name.
/// Prefer it to stdout/stderr, which the host may not keep.
pub mod log {
    use crate::bindings::agentd::plugin::logging::{self, Level};

    pub fn trace(message: &str) {
        logging::log(Level::Trace, message);
    }

    pub fn debug(message: &str) {
        logging::log(Level::Debug, message);
    }

    pub fn info(message: &str) {
        logging::log(Level::Info, message);
    }

    pub fn warn(message: &str) {
        logging::log(Level::Warn, message);
    }

    pub fn error(message: &str) {
        logging::log(Level::Error, message);
    }
}
