//! Names: the default group's, checks on the names users give, fresh
//! random ones.

use crate::error::Error;

/// The name of the group `spec.workers` describes.
pub const DEFAULT_GROUP: &str = "default";

/// `2n` random hex digits (pod name suffixes, tokens).
pub fn random_hex(n: usize) -> Result<String, Error> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::Other(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Cluster and group names become parts of object names (DNS labels).
pub fn validate_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::Spec(format!(
            "{name:?} is not a valid name: use 1 to 40 lower-case letters, digits and '-', not at either end"
        )))
    }
}
