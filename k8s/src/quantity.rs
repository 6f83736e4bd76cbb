//! Kubernetes quantities ("2500m", "4Gi", "1e9", 3) read as the numbers a
//! worker's flags take: whole threads (CPUs rounded up) and bytes.

use serde_json::Value;

/// A quantity's value as a number (the unit suffixes of the Kubernetes
/// quantity grammar: milli, decimal and binary SI, decimal exponents).
pub fn value(q: &Value) -> Result<f64, String> {
    let s = match q {
        Value::Number(n) => return n.as_f64().ok_or_else(|| format!("{n} is not a quantity")),
        Value::String(s) => s.trim(),
        other => return Err(format!("{other} is not a quantity")),
    };
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (num, scale) =
        SUFFIXES.iter().find_map(|(suf, scale)| s.strip_suffix(suf).map(|n| (n, *scale))).unwrap_or((s, 1.0));
    let bad = || format!("{s:?} is not a quantity (like 500m, 4, 16Gi or 1e9)");
    if num.is_empty() || num.starts_with(['+', '-']) && num.len() == 1 {
        return Err(bad());
    }
    let n: f64 = num.parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    Ok(n * scale)
}

/// CPUs as worker threads: rounded up, at least one.
pub fn cpu_threads(q: &Value) -> Result<u64, String> {
    Ok((value(q)?.ceil() as u64).max(1))
}

/// A memory quantity in bytes.
pub fn bytes(q: &Value) -> Result<u64, String> {
    let b = value(q)?;
    if b < 1.0 {
        return Err(format!("{q} is less than a byte"));
    }
    Ok(b.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_read_as_kubernetes_reads_them() {
        assert_eq!(cpu_threads(&json!("500m")), Ok(1));
        assert_eq!(cpu_threads(&json!("2500m")), Ok(3));
        assert_eq!(cpu_threads(&json!(4)), Ok(4));
        assert_eq!(cpu_threads(&json!("1.5")), Ok(2));
        assert_eq!(bytes(&json!("16Gi")), Ok(16 << 30));
        assert_eq!(bytes(&json!("1G")), Ok(1_000_000_000));
        assert_eq!(bytes(&json!("1e9")), Ok(1_000_000_000));
        assert_eq!(bytes(&json!("512Mi")), Ok(512 << 20));
    }

    #[test]
    fn nonsense_is_refused() {
        for q in [json!("lots"), json!("-1Gi"), json!(""), json!("Gi"), json!(true), json!("1.2.3")] {
            assert!(bytes(&q).is_err(), "{q}");
        }
        assert!(bytes(&json!("1m")).is_err());
    }
}
