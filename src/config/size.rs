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
    /// Anything else (a negative number, a fraction, a table): kept so that
    /// [`ByteSize::bytes`] can refuse it naming the key, instead of serde's
    /// "did not match any variant of untagged enum".
    Other(toml::Value),
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
            ByteSize::Other(v) => Err(format!(
                "{key} = {v} is not a size: write a whole number of bytes, or a size like \"256m\" or \"1.5g\""
            )),
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
        for other in ["-1", "1.5", "true"] {
            let v: ByteSize = toml::from_str::<toml::Table>(&format!("k = {other}"))
                .expect("toml")
                .remove("k")
                .expect("k")
                .try_into()
                .expect("any value is a ByteSize");
            let e = v.bytes("[daemon] max_run_bytes").expect_err("refused");
            assert!(
                e.starts_with(&format!("[daemon] max_run_bytes = {other} is not a size")),
                "{e}"
            );
        }
    }
}
