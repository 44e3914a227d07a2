//! The chat vocabulary every layer shares: messages and their roles, tool
//! calls, tool specs and the tool choice, token usage, and the checks a
//! real OpenAI-compatible server makes on a conversation. It is the leaf of
//! the crate (it depends on nothing else in it), so the LLM client, the
//! plugin host, the run loop and the API speak the same types without
//! knowing each other. The `Message` serde shape is OpenAI's, and is also
//! the API's and the history's: what is stored is exactly what is sent.

mod message;
mod tools;
mod usage;

pub use message::{
    check_request, check_tool_pairing, encode_shared, AsMessage, Kept, Message, MessageError, Role,
    SharedJson, ToolCall,
};
pub use tools::{ToolChoice, ToolSpec};
pub use usage::Usage;
