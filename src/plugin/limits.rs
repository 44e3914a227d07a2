//! What one plugin instance may take from the host, enforced per store (a
//! run's strategy, and each tool in a run, has its own store), and how a
//! plugin that hit one of these limits is named when it stops.
//!
//! The pool caps in `engine.rs` bound what a component may *declare* (core
//! instances, memories, tables); this file bounds what an instance may
//! *grow to* and *hand over*:
//! - [`StoreLimiter`]: the sum of all of an instance's linear memories stays
//!   within `[plugins] memory_limit` (the pool alone caps each memory, so a
//!   component with four memories could otherwise take four times as much),
//!   and its tables within [`MAX_TABLE_ELEMENTS`];
//! - [`HOSTCALL_FUEL`]: the bytes one call may copy out of the plugin into
//!   the host (wasmtime's default is 128 MiB per call);
//! - [`MAX_HOST_HANDLES`] and [`MAX_COMPONENT_HANDLES`]: handles the plugin
//!   may hold at once (each WASI stdout handle is a host task; wasmtime's
//!   defaults are 1,000,000 and 100,000);
//! - [`MAX_LOG_MESSAGE`]: a `logging.log` message is cut to this size.
//!
//! When a plugin traps after hitting one of these, [`classify`] turns the
//! trap into a [`LimitHit`] that names the plugin and the limit, so the run
//! ends `error` saying what happened instead of "unreachable executed".

use wasmtime::component::ResourceTableError;
use wasmtime::{ResourceLimiter, Trap};

use super::settings::show_bytes;

/// Bytes one call may copy out of a plugin: the arguments of an import it
/// calls, or the result of an export the host calls. Large enough for every
/// real transfer (a chat request, a tool result of `2 x [sandbox]
/// output_limit`, a file a tool writes), small enough that one call cannot
/// make the host allocate 128 MiB. Past it the plugin traps.
pub const HOSTCALL_FUEL: usize = 16 << 20;

/// Host-side handles (WASI streams, pollables) one plugin instance may hold
/// at once. A plugin has no files, sockets or clocks; a Rust guest holds
/// fewer than ten. Each stdout handle is a task in the host, so a guest
/// calling `get-stdout()` in a loop is stopped here.
pub const MAX_HOST_HANDLES: usize = 256;

/// Component-model handles (resources the guest creates itself, borrows)
/// one store may hold at once.
pub const MAX_COMPONENT_HANDLES: usize = 1024;

/// Table elements one plugin instance may hold, summed over its tables
/// (each at most [`super::engine::MAX_TABLES_PER_COMPONENT`]). A Rust
/// component's function table has a few hundred, a Python one (CPython)
/// about 5700.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// A `logging.log` message longer than this is cut (with a note saying how
/// much): the journal is not a place for megabytes, and a plugin logging in
/// a loop must not fill the disk faster than it must.
pub const MAX_LOG_MESSAGE: usize = 8 << 10;

/// The core instances, memories and tables one store may create, the same
/// as the pool's per-component caps: a second line of defence that holds
/// even for a component the pool's static check cannot see through.
const STORE_INSTANCES: usize = super::engine::MAX_CORE_INSTANCES_PER_COMPONENT as usize;
const STORE_MEMORIES: usize = super::engine::MAX_MEMORIES_PER_COMPONENT as usize;
const STORE_TABLES: usize = super::engine::MAX_TABLES_PER_COMPONENT as usize;

/// Which growth the limiter refused, kept so the trap that usually follows
/// can be explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// The instance's memories would have summed to `wanted` bytes.
    Memory { wanted: usize },
    /// The instance's tables would have summed to `wanted` elements.
    Table { wanted: usize },
}

/// The `ResourceLimiter` of one plugin store: memory summed over all the
/// instance's memories, table elements summed over its tables.
///
/// Growth is refused (`memory.grow` returns -1, as the wasm spec allows)
/// rather than trapped, so a guest that can cope with a failed allocation
/// may; most cannot and abort, and the refusal recorded here names the
/// cause of that trap. An approved growth that wasmtime then fails (past a
/// memory's own declared maximum) stays counted: the count can only be too
/// high, never too low, so it cannot be gamed.
#[derive(Debug)]
pub struct StoreLimiter {
    memory_limit: usize,
    memory: usize,
    table_elements: usize,
    refused: Option<Refused>,
}

impl StoreLimiter {
    /// A limiter allowing `memory_limit` bytes over all memories.
    pub fn new(memory_limit: usize) -> Self {
        StoreLimiter {
            memory_limit,
            memory: 0,
            table_elements: 0,
            refused: None,
        }
    }

    /// Bytes of linear memory the instance holds now (summed).
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// The limit this store was given.
    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }
}

impl ResourceLimiter for StoreLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let wanted = self.memory.saturating_add(desired.saturating_sub(current));
        if wanted > self.memory_limit {
            tracing::debug!(
                memory = self.memory,
                wanted,
                limit = self.memory_limit,
                "plugin memory growth refused"
            );
            self.refused = Some(Refused::Memory { wanted });
            return Ok(false);
        }
        self.memory = wanted;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let wanted = self
            .table_elements
            .saturating_add(desired.saturating_sub(current));
        if wanted > MAX_TABLE_ELEMENTS {
            self.refused = Some(Refused::Table { wanted });
            return Ok(false);
        }
        self.table_elements = wanted;
        Ok(true)
    }

    fn instances(&self) -> usize {
        STORE_INSTANCES
    }

    fn memories(&self) -> usize {
        STORE_MEMORIES
    }

    fn tables(&self) -> usize {
        STORE_TABLES
    }
}

/// A plugin was stopped by one of the host's limits. Each variant names the
/// plugin and the limit (the config key where there is one), because that
/// is what a user reading a failed run needs to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitHit {
    /// The instance's memories, summed, would have passed `memory_limit`.
    #[error("plugin `{plugin}` reached its memory limit of {} ([plugins.{plugin}] memory_limit where set, else [plugins] memory_limit): growing its memory to {} was refused", show_bytes(*.limit as u64), show_bytes(*.wanted as u64))]
    Memory {
        /// The plugin stopped.
        plugin: String,
        /// `[plugins] memory_limit` in bytes.
        limit: usize,
        /// The bytes its memories would have summed to.
        wanted: usize,
    },
    /// The instance's tables, summed, would have passed [`MAX_TABLE_ELEMENTS`].
    #[error("plugin `{plugin}` reached the table limit of {MAX_TABLE_ELEMENTS} elements per instance: growing its tables to {wanted} was refused")]
    Table {
        /// The plugin stopped.
        plugin: String,
        /// The elements its tables would have summed to.
        wanted: usize,
    },
    /// Deep or unbounded recursion.
    #[error("plugin `{plugin}` overflowed its call stack (deep or unbounded recursion)")]
    Stack {
        /// The plugin stopped.
        plugin: String,
    },
    /// It held more handles than [`MAX_HOST_HANDLES`] or [`MAX_COMPONENT_HANDLES`].
    #[error("plugin `{plugin}` held too many handles at once (at most {MAX_HOST_HANDLES} host handles such as WASI streams, {MAX_COMPONENT_HANDLES} component handles); a plugin calling get-stdout() in a loop without dropping them is stopped here")]
    Handles {
        /// The plugin stopped.
        plugin: String,
    },
    /// One call tried to copy more than [`HOSTCALL_FUEL`] bytes out of it.
    #[error("plugin `{plugin}` tried to pass more than {} to the host in one call (the per-call limit on data a plugin hands over)", show_bytes(HOSTCALL_FUEL as u64))]
    HostcallData {
        /// The plugin stopped.
        plugin: String,
    },
}

impl LimitHit {
    /// The plugin that was stopped.
    pub fn plugin(&self) -> &str {
        match self {
            LimitHit::Memory { plugin, .. }
            | LimitHit::Table { plugin, .. }
            | LimitHit::Stack { plugin }
            | LimitHit::Handles { plugin }
            | LimitHit::HostcallData { plugin } => plugin,
        }
    }
}

/// Whether `error` (a trap, or a failed instantiation, of `plugin`'s store
/// whose limiter is `limiter`) was caused by one of the limits above.
/// `None` for an ordinary trap (a panic, a bug), which keeps its own
/// handling.
pub fn classify(error: &wasmtime::Error, limiter: &StoreLimiter, plugin: &str) -> Option<LimitHit> {
    let plugin = plugin.to_string();
    // Checked first: a refused growth is what makes a guest abort, and the
    // abort itself (`unreachable`) says nothing.
    match limiter.refused {
        Some(Refused::Memory { wanted }) => {
            return Some(LimitHit::Memory {
                plugin,
                limit: limiter.memory_limit,
                wanted,
            })
        }
        Some(Refused::Table { wanted }) => return Some(LimitHit::Table { plugin, wanted }),
        None => {}
    }
    let trap = error.downcast_ref::<Trap>();
    if trap == Some(&Trap::StackOverflow) {
        return Some(LimitHit::Stack { plugin });
    }
    // wasmtime reports these three with private error types; their messages
    // are pinned by this module's tests.
    let text = format!("{error:#}");
    if trap == Some(&Trap::MemoryOutOfBounds) && wrapped_stack_pointer(&text) {
        return Some(LimitHit::Stack { plugin });
    }
    if matches!(
        error.downcast_ref::<ResourceTableError>(),
        Some(ResourceTableError::Full)
    ) {
        return Some(LimitHit::Handles { plugin });
    }
    if text.contains("store handle limit exceeded") {
        return Some(LimitHit::Handles { plugin });
    }
    if text.contains("fuel allocated for hostcalls has been exhausted") {
        return Some(LimitHit::HostcallData { plugin });
    }
    None
}

/// Where a stack that overflowed below address 0 faults: Rust and C guests
/// keep their stack in linear memory, at its bottom, growing down; past its
/// end the stack pointer wraps to just under 4 GiB, and the access (plus a
/// small offset) lands there, far beyond any memory a plugin may have.
const WRAPPED_STACK: u64 = (4 << 30) - (16 << 20);

/// Whether a memory fault's message ("memory fault at wasm address 0x...
/// in linear memory of size 0x...") is the access of a wrapped stack
/// pointer rather than a stray pointer inside the memory's range.
fn wrapped_stack_pointer(text: &str) -> bool {
    let Some(rest) = text.split("memory fault at wasm address 0x").nth(1) else {
        return false;
    };
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    u64::from_str_radix(&hex, 16).is_ok_and(|address| address >= WRAPPED_STACK)
}

/// `message` cut to [`MAX_LOG_MESSAGE`] bytes (at a character boundary),
/// with a note saying how much was cut.
pub fn capped_log_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_LOG_MESSAGE {
        return message.into();
    }
    let mut end = MAX_LOG_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes cut: a log message is at most {}]",
        &message[..end],
        message.len() - end,
        show_bytes(MAX_LOG_MESSAGE as u64)
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_summed_over_all_memories_of_the_store() {
        let mut l = StoreLimiter::new(10 << 20);
        // Two memories of 4 MiB each: 8 MiB in all.
        assert!(l.memory_growing(0, 4 << 20, None).unwrap());
        assert!(l.memory_growing(0, 4 << 20, None).unwrap());
        // Either growing by 4 MiB more would make 12 MiB: refused.
        assert!(!l.memory_growing(4 << 20, 8 << 20, None).unwrap());
        assert_eq!(l.memory(), 8 << 20);
        // 2 MiB more fits exactly.
        assert!(l.memory_growing(4 << 20, 6 << 20, None).unwrap());
        assert_eq!(l.memory(), 10 << 20);
    }

    #[test]
    fn a_refusal_names_the_plugin_and_the_key() {
        let mut l = StoreLimiter::new(4 << 20);
        assert!(!l.memory_growing(0, 5 << 20, None).unwrap());
        let trap = wasmtime::Error::new(Trap::UnreachableCodeReached);
        let hit = classify(&trap, &l, "hog").expect("the refusal explains the trap");
        let text = hit.to_string();
        assert!(text.contains("plugin `hog`"), "{text}");
        assert!(text.contains("memory limit of 4 MiB ([plugins.hog] memory_limit where set, else [plugins] memory_limit)"), "{text}");
        assert!(text.contains("5 MiB"), "{text}");
    }

    #[test]
    fn tables_are_summed_too() {
        let mut l = StoreLimiter::new(4 << 20);
        assert!(l.table_growing(0, MAX_TABLE_ELEMENTS, None).unwrap());
        assert!(!l.table_growing(0, 1, None).unwrap());
        let hit = classify(&wasmtime::Error::msg("x"), &l, "t").expect("table");
        assert!(matches!(hit, LimitHit::Table { .. }), "{hit}");
    }

    #[test]
    fn an_ordinary_trap_is_not_a_limit() {
        let l = StoreLimiter::new(4 << 20);
        let trap = wasmtime::Error::new(Trap::UnreachableCodeReached);
        assert_eq!(classify(&trap, &l, "p"), None);
    }

    #[test]
    fn stack_overflow_and_a_full_table_are_limits() {
        let l = StoreLimiter::new(4 << 20);
        let stack = wasmtime::Error::new(Trap::StackOverflow);
        assert_eq!(
            classify(&stack, &l, "deep"),
            Some(LimitHit::Stack {
                plugin: "deep".into()
            })
        );
        let full = wasmtime::Error::new(ResourceTableError::Full);
        assert_eq!(
            classify(&full, &l, "h"),
            Some(LimitHit::Handles { plugin: "h".into() })
        );
    }

    #[test]
    fn a_stack_pointer_wrapped_below_zero_is_a_stack_overflow() {
        let l = StoreLimiter::new(4 << 20);
        // What wasmtime 48 reports when a Rust guest's stack overflows.
        let wrapped = wasmtime::Error::new(Trap::MemoryOutOfBounds)
            .context("memory fault at wasm address 0x100000060 in linear memory of size 0x110000");
        assert_eq!(
            classify(&wrapped, &l, "deep"),
            Some(LimitHit::Stack {
                plugin: "deep".into()
            })
        );
        // A stray pointer inside the 4 GiB range is an ordinary trap.
        let stray = wasmtime::Error::new(Trap::MemoryOutOfBounds)
            .context("memory fault at wasm address 0x2000000 in linear memory of size 0x110000");
        assert_eq!(classify(&stray, &l, "bug"), None);
    }

    #[test]
    fn long_log_messages_are_cut_at_a_character_boundary() {
        assert_eq!(capped_log_message("short"), "short");
        let long = "é".repeat(MAX_LOG_MESSAGE);
        let cut = capped_log_message(&long);
        assert!(cut.len() < MAX_LOG_MESSAGE + 100, "{}", cut.len());
        assert!(cut.contains("more bytes cut"), "{cut}");
    }
}

/// The limiter in a real store of the real engine: the sum is over all of
/// an instance's memories, which no per-memory cap of the pool can give.
#[cfg(test)]
mod engine_tests {
    use super::*;
    use crate::plugin::engine::{build_engine_with, EngineLimits};
    use crate::plugin::settings::PluginSettings;
    use crate::plugin::store::{new_store, Limited};
    use wasmtime::component::{Component, Linker};

    struct Data(StoreLimiter);

    impl Limited for Data {
        fn limiter(&mut self) -> &mut StoreLimiter {
            &mut self.0
        }
    }

    /// Four core instances of one module, each with its own memory (within
    /// the pool's caps), each growable from outside.
    const FOUR_MEMORIES: &str = r#"(component
        (core module $m
            (memory 1)
            (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
        (core instance $a (instantiate $m))
        (core instance $b (instantiate $m))
        (core instance $c (instantiate $m))
        (core instance $d (instantiate $m))
        (func (export "grow-a") (param "pages" u32) (result s32) (canon lift (core func $a "grow")))
        (func (export "grow-b") (param "pages" u32) (result s32) (canon lift (core func $b "grow")))
        (func (export "grow-c") (param "pages" u32) (result s32) (canon lift (core func $c "grow")))
        (func (export "grow-d") (param "pages" u32) (result s32) (canon lift (core func $d "grow"))))"#;

    #[tokio::test(flavor = "multi_thread")]
    async fn memory_limit_is_the_sum_over_all_memories_of_an_instance() {
        let settings = PluginSettings {
            memory_limit: 32 << 20,
        };
        let engine = build_engine_with(
            EngineLimits {
                max_concurrent_runs: 1,
            },
            &settings,
        )
        .expect("engine");
        let bytes = wat::parse_str(FOUR_MEMORIES).expect("component text");
        let component = Component::new(&engine, bytes).expect("within the pool's caps");
        let mut store = new_store(
            &engine,
            Data(StoreLimiter::new(settings.memory_limit_bytes())),
        );
        let instance = Linker::new(&engine)
            .instantiate_async(&mut store, &component)
            .await
            .expect("instantiate");
        // 160 pages (10 MiB) each: every memory alone is far below 32 MiB,
        // but the fourth growth would make 40 MiB in all.
        let mut grown = Vec::new();
        for name in ["grow-a", "grow-b", "grow-c", "grow-d"] {
            let grow = instance
                .get_typed_func::<(u32,), (i32,)>(&mut store, name)
                .expect("export");
            let (old_pages,) = grow.call_async(&mut store, (160,)).await.expect("call");
            grown.push(old_pages);
        }
        assert_eq!(grown, [1, 1, 1, -1], "the fourth growth is refused");
        assert_eq!(store.data().0.memory(), (4 << 16) + 3 * (160 << 16));
        let hit = classify(&wasmtime::Error::msg("abort"), &store.data().0, "four")
            .expect("the refusal is remembered");
        assert!(
            hit.to_string()
                .contains("plugin `four` reached its memory limit of 32 MiB"),
            "{hit}"
        );
    }

    #[test]
    fn a_component_over_the_core_instance_cap_is_refused_when_compiled() {
        let engine = build_engine_with(
            EngineLimits {
                max_concurrent_runs: 1,
            },
            &PluginSettings::default(),
        )
        .expect("engine");
        let mut text = String::from("(component (core module $m (memory 1))");
        for i in 0..300 {
            text.push_str(&format!(" (core instance $i{i} (instantiate $m))"));
        }
        text.push(')');
        let bytes = wat::parse_str(&text).expect("component text");
        let err = Component::new(&engine, bytes).expect_err("over the cap");
        let text = format!("{err:#}");
        assert!(
            text.contains("300 core module instances")
                && text.contains(&format!(
                    "maximum of {}",
                    crate::plugin::engine::MAX_CORE_INSTANCES_PER_COMPONENT
                ))
                && text.contains("pooling allocator"),
            "{text}"
        );
    }
}
