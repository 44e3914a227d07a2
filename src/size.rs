//! Byte sizes as Docker writes them: `512m`, `1.5g`, `256k`, `64MiB` or a
//! plain number of bytes (k, m, g, t are powers of 1024; a trailing `b` or
//! `ib` is allowed). One parser for every size in the configuration file
//! (`[sandbox] memory_limit`, `disk_limit`, `[plugins] memory_limit`), so
//! they all read the same; a leaf, because the sandbox and the
//! configuration both use it.

/// The number of bytes `text` means; the error says what is wrong, and the
/// caller names the key.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| "expected a size like 512m, 1g, 256k or a number of bytes".to_string())?;
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => return Err("the unit must be one of b, k, m, g, t".into()),
    };
    let bytes = (value * (1u64 << shift) as f64).round();
    if !bytes.is_finite() || bytes >= i64::MAX as f64 {
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
        assert!(parse_size("9000000t").is_err());
    }
}
