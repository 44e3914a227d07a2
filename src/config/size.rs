//! Byte sizes in the configuration file: a plain number of bytes, or a
//! string with a unit as Docker writes them (`256m`, `1g`, `64MiB`), so
//! `[plugins] memory_limit` reads like `[sandbox] memory_limit`.

use serde::Deserialize;

use crate::size::parse_size;

/// A size as written: `268435456` or `"256m"`. Checked (and turned into
/// bytes) by [`ByteSize::bytes`], which can name the key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ByteSize {
    /// A number of bytes.
    Bytes(u64),
    /// A number with a unit: b, k, m, g, t (powers of 1024; `kb`, `kib`
    /// and the like are the same).
    Text(String),
}

impl ByteSize {
    /// The size in bytes; the error names `key` (`[table] key` first, so
    /// the caller can find its line).
    pub fn bytes(&self, key: &str) -> Result<u64, String> {
        match self {
            ByteSize::Bytes(n) => Ok(*n),
            ByteSize::Text(t) => parse_size(t).map_err(|why| {
                format!("{key} `{t}` is not a size: {why} (a number of bytes, or e.g. 256m, 1g)")
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units_and_plain_bytes() {
        assert_eq!(ByteSize::Text("256m".into()).bytes("k"), Ok(256 << 20));
        assert_eq!(ByteSize::Bytes(7).bytes("k"), Ok(7));
        let e = ByteSize::Text("lots".into())
            .bytes("[plugins] memory_limit")
            .expect_err("not a size");
        assert!(e.starts_with("[plugins] memory_limit `lots`"), "{e}");
    }
}
