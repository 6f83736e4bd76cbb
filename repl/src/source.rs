//! Reading a script (`brisk run FILE`, `:load FILE`, piped stdin). What is
//! not a script is refused before it is read whole: a directory, a device
//! (`/dev/zero` never ends), a FIFO (opening one waits for a writer), more
//! than `MAX_SCRIPT` bytes, binary data.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};

/// The largest script brisk reads. Scripts are code; data is read by the
/// readers, in blocks. 16 MiB is far above any script written by hand or
/// generated, and far below what could exhaust memory.
pub const MAX_SCRIPT: u64 = 16 << 20;

/// The text of the script at `path`, or why it is not one.
pub fn read_file(path: &Path) -> anyhow::Result<String> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {name}"))?;
    check_kind(&meta, &name)?;
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {name}"))?;
    // The file opened may not be the one looked at (replaced in between).
    check_kind(&file.metadata().with_context(|| format!("cannot read {name}"))?, &name)?;
    let bytes = read_capped(file, &name)?;
    text(bytes, &name)
}

/// The whole of piped stdin as one script, under the same rules.
pub fn read_stdin() -> anyhow::Result<String> {
    let bytes = read_capped(std::io::stdin().lock(), "stdin")?;
    text(bytes, "stdin")
}

fn check_kind(meta: &std::fs::Metadata, name: &str) -> anyhow::Result<()> {
    let kind = meta.file_type();
    if kind.is_dir() {
        bail!("{name} is a directory, not a script");
    }
    if !kind.is_file() {
        bail!("{name} is not a regular file (a device, FIFO or socket); brisk runs scripts from files");
    }
    if meta.len() > MAX_SCRIPT {
        bail!("{name} is {} bytes, more than a script may be ({} MiB)", meta.len(), MAX_SCRIPT >> 20);
    }
    Ok(())
}

/// Read at most `MAX_SCRIPT` bytes (a file may grow after it was looked at).
fn read_capped(reader: impl Read, name: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(MAX_SCRIPT + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {name}"))?;
    if bytes.len() as u64 > MAX_SCRIPT {
        bail!("{name} holds more than a script may ({} MiB)", MAX_SCRIPT >> 20);
    }
    Ok(bytes)
}

/// UTF-8 text without NUL bytes (which no script has and every binary file does).
fn text(bytes: Vec<u8>, name: &str) -> anyhow::Result<String> {
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{name} is not a UTF-8 text file (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    if let Some(at) = text.find('\0') {
        bail!("{name} is not a text file (a NUL byte at offset {at})");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_is_a_script() {
        assert_eq!(text(b"let x = 1;".to_vec(), "s").expect("text"), "let x = 1;");
        let e = text(vec![b'a', 0xff], "s").expect_err("bad utf-8").to_string();
        assert_eq!(e, "s is not a UTF-8 text file (invalid byte at offset 1)");
        let e = text(b"ab\0c".to_vec(), "s").expect_err("nul").to_string();
        assert_eq!(e, "s is not a text file (a NUL byte at offset 2)");
        let e = read_capped(std::io::repeat(b'a'), "endless").expect_err("capped").to_string();
        assert_eq!(e, "endless holds more than a script may (16 MiB)");
    }
}
