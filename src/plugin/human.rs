//! The `AskHuman` trait: what a plugin's `human.ask` import (contract
//! 0.2.2) needs from the run it serves. The run loop implements it (the
//! run's `waiting` state, its events, `input_timeout`, the API that carries
//! the answer); the plugin host only forwards the question, pauses the step
//! clock while it waits, and turns a failure into the contract's error
//! (`strategy_host.rs`, `tool_host.rs`). Defined here, below both worlds'
//! hosts, so neither the host depends on the loop nor the loop on wasmtime.

use super::bindings::types::{self as wit, ErrorCode};

/// Why `human.ask` got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskFailure {
    /// Nobody answered within the run's `input_timeout`; the text says so ("no answer within 1h (input_timeout)").
    NoAnswer(String),
    /// The wait was ended by a cancel. agentd's loop drops a cancelled
    /// step instead, so its runs never return this; it is here for an
    /// `AskHuman` that ends the wait itself.
    Cancelled,
    /// No person can be asked here (a load-time probe, `agentd plugin call`); the text says why.
    Unavailable(String),
}

/// What a plugin's `human.ask` import needs from its run; the run loop implements it.
#[async_trait::async_trait]
pub trait AskHuman: Send + Sync {
    /// `plugin` (the asking strategy's or tool's name) asks `question` on behalf of its run and waits.
    async fn ask(&self, plugin: &str, question: String) -> Result<String, AskFailure>;
}

/// For stores with no run behind them.
pub struct NoHuman(pub &'static str);

impl NoHuman {
    /// What a strategy or tool asking at load time (in `metadata`, `spec`
    /// or `defaults`) is told.
    pub const PROBE: NoHuman = NoHuman("a load-time probe has no person to ask");
}

#[async_trait::async_trait]
impl AskHuman for NoHuman {
    async fn ask(&self, _plugin: &str, _question: String) -> Result<String, AskFailure> {
        Err(AskFailure::Unavailable(self.0.to_string()))
    }
}

impl AskFailure {
    /// The error the asking plugin sees, as the contract's `human.ask`
    /// documents it. `types` has no code of its own for "nobody answered"
    /// (adding one would break linking 0.2.x components), so a timeout and
    /// "nobody to ask" are both `failed`, told apart by their text.
    pub fn into_wit(self) -> wit::Error {
        let (code, message) = match self {
            AskFailure::NoAnswer(text) | AskFailure::Unavailable(text) => (ErrorCode::Failed, text),
            AskFailure::Cancelled => (
                ErrorCode::Cancelled,
                "the run was cancelled while waiting for an answer".to_string(),
            ),
        };
        wit::Error { code, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_the_contracts_codes() {
        let e = AskFailure::NoAnswer("no answer within 1h (input_timeout)".into()).into_wit();
        assert_eq!(e.code, ErrorCode::Failed);
        assert_eq!(e.message, "no answer within 1h (input_timeout)");
        assert_eq!(AskFailure::Cancelled.into_wit().code, ErrorCode::Cancelled);
        let e = AskFailure::Unavailable("nobody".into()).into_wit();
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::Failed, "nobody"));
    }

    #[tokio::test]
    async fn no_human_says_why() {
        let answer = NoHuman::PROBE.ask("ask_human", "?".into()).await;
        assert_eq!(
            answer,
            Err(AskFailure::Unavailable(
                "a load-time probe has no person to ask".into()
            ))
        );
    }
}
