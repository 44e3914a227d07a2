//! The agent core: the run loop, its memory, stuck detection and outcomes.
//! It knows nothing of models or tools; `step()` belongs to the strategy
//! plugin.

pub mod context;
pub mod events;
pub mod memory;
pub mod message;
pub mod outcome;
pub mod run;
pub mod settings;
pub mod stuck;

pub use events::{EventSink, MessageSink, RunEvent};
pub use message::{Message, Role, ToolCall};
pub use outcome::{AgentState, Outcome, RunRecord};
pub use run::{Agent, AgentError, RunOptions, Runtime};
