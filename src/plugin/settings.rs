//! The plugin host's settings (`[plugins]`), owned here and built by
//! `config`, which only parses the file. They are read once, when the engine
//! is built: the pool's slots are sized from them, so a change takes effect
//! at the next start.

/// The default of `[plugins] memory_limit`: what ARCHITECTURE.md promised a
/// plugin instance since the start (one linear memory of 256 MiB), now a
/// promise about the whole instance, however many memories it has.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;

/// The smallest `[plugins] memory_limit` accepted: a Rust component needs
/// about 1-2 MiB before its first call, so less could never serve.
pub const MIN_MEMORY_LIMIT: u64 = 4 << 20;

/// The largest `[plugins] memory_limit` accepted: 32-bit wasm cannot address
/// more than 4 GiB in one memory, and the pool reserves address space per
/// memory slot from this value.
pub const MAX_MEMORY_LIMIT: u64 = 4 << 30;

/// `[plugins]`: limits on what one plugin instance may take from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginSettings {
    /// Bytes of linear memory one plugin instance (one store: a run's
    /// strategy, or one tool in one run) may hold, summed over all of its
    /// memories. Growth past it is refused; the plugin usually traps then,
    /// and the run ends `error` naming the plugin and this key.
    pub memory_limit: u64,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            memory_limit: DEFAULT_MEMORY_LIMIT,
        }
    }
}

impl PluginSettings {
    /// Whether the settings can work, with the key and the reason when they
    /// cannot (`config` prefixes the file and line).
    pub fn check(&self) -> Result<(), String> {
        if !(MIN_MEMORY_LIMIT..=MAX_MEMORY_LIMIT).contains(&self.memory_limit) {
            return Err(format!(
                "[plugins] memory_limit must be between {} and {} (bytes, or a size like 256m), not {}",
                show_bytes(MIN_MEMORY_LIMIT),
                show_bytes(MAX_MEMORY_LIMIT),
                self.memory_limit
            ));
        }
        Ok(())
    }

    /// `memory_limit` as a `usize` for wasmtime (which counts in `usize`);
    /// [`check`](Self::check) keeps it at most 4 GiB, which fits on every
    /// 64-bit host agentd supports, and it saturates otherwise.
    pub fn memory_limit_bytes(&self) -> usize {
        usize::try_from(self.memory_limit).unwrap_or(usize::MAX)
    }
}

/// A byte count for people: `256 MiB`, `1.5 GiB`, `300 KiB`, `17 B`.
pub fn show_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u32); 3] = [("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        let one = 1u64 << shift;
        if bytes >= one {
            let whole = bytes >> shift;
            let tenths = ((bytes & (one - 1)) * 10) >> shift;
            return if tenths == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenths} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_256_mib_and_valid() {
        let s = PluginSettings::default();
        assert_eq!(s.memory_limit, 256 << 20);
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn out_of_range_limits_are_refused_naming_the_key() {
        for bad in [0, 1 << 20, (4 << 30) + 1] {
            let err = PluginSettings { memory_limit: bad }
                .check()
                .expect_err("out of range");
            assert!(err.starts_with("[plugins] memory_limit"), "{err}");
        }
    }

    #[test]
    fn bytes_are_shown_in_binary_units() {
        assert_eq!(show_bytes(256 << 20), "256 MiB");
        assert_eq!(show_bytes(3 << 29), "1.5 GiB");
        assert_eq!(show_bytes(300 << 10), "300 KiB");
        assert_eq!(show_bytes(17), "17 B");
    }
}
