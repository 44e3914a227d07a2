//! Byte sizes in the configuration file: a plain number of bytes, or a
//! string with a unit as Docker writes them (`256m`, `1g`, `64MiB`), so
//! `[plugins] memory_limit` reads like `[sandbox] memory_limit`.

use serde::Deserialize;

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

/// `512m`, `1.5g`, `256k`, `64MiB`, `1048576`.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| "expected a number and a unit".to_string())?;
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => return Err("the unit must be one of b, k, m, g, t".into()),
    };
    let bytes = (value * (1u64 << shift) as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_units_and_plain_bytes() {
        assert_eq!(parse_size("256m"), Ok(256 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert!(parse_size("12x").is_err());
        assert!(parse_size("m").is_err());
        assert!(parse_size("-5m").is_err());
        assert_eq!(ByteSize::Bytes(7).bytes("k"), Ok(7));
        let e = ByteSize::Text("lots".into())
            .bytes("[plugins] memory_limit")
            .expect_err("not a size");
        assert!(e.starts_with("[plugins] memory_limit `lots`"), "{e}");
    }
}
