//! Sizes as flags, variables and the config file write them: `512MiB`,
//! `2GB`, `1048576`. Kept apart from the config, which reads them, so the
//! tables it hands to other modules (`[[fair_use]]`) can too.

/// Parse `512MiB`, `2GB`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size like 512MiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        other => return Err(format!("unknown size unit '{other}' in '{s}'")),
    };
    Ok((value * scale as f64) as u64)
}
