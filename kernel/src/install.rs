//! `brisk kernel install` / `uninstall`: the kernelspec Jupyter finds
//! (`kernels/brisk/kernel.json` with the absolute path of this binary, and
//! the logos) under the user's, the environment's or a given prefix's data
//! directory, as `jupyter kernelspec install` places them.

use std::path::{Path, PathBuf};

/// The kernel's directory name: `jupyter kernelspec list` shows it.
pub const NAME: &str = "brisk";

const LOGO_32: &[u8] = include_bytes!("../assets/logo-32x32.png");
const LOGO_64: &[u8] = include_bytes!("../assets/logo-64x64.png");

/// Where to install, as `jupyter kernelspec install`'s options.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// `--user`: `$JUPYTER_DATA_DIR`, else the user's data directory.
    User,
    /// `--sys-prefix`: the active Python environment (`$VIRTUAL_ENV` or `$CONDA_PREFIX`).
    SysPrefix,
    /// `--prefix DIR`: `DIR/share/jupyter`.
    Prefix(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("--sys-prefix needs an active Python environment (VIRTUAL_ENV or CONDA_PREFIX is not set)")]
    NoEnvironment,
    #[error("cannot find the user's data directory (HOME is not set)")]
    NoHome,
    #[error("cannot find the brisk binary: {0}")]
    NoBinary(std::io::Error),
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("no brisk kernel is installed at {0}")]
    NotInstalled(String),
}

/// The Jupyter data directory of a target.
pub fn data_dir(target: &Target) -> Result<PathBuf, InstallError> {
    match target {
        Target::User => {
            if let Some(d) = std::env::var_os("JUPYTER_DATA_DIR") {
                return Ok(PathBuf::from(d));
            }
            let home = std::env::var_os("HOME").ok_or(InstallError::NoHome)?;
            Ok(if cfg!(target_os = "macos") {
                PathBuf::from(home).join("Library/Jupyter")
            } else {
                std::env::var_os("XDG_DATA_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(home).join(".local/share"))
                    .join("jupyter")
            })
        }
        Target::SysPrefix => {
            let prefix = std::env::var_os("VIRTUAL_ENV")
                .or_else(|| std::env::var_os("CONDA_PREFIX"))
                .ok_or(InstallError::NoEnvironment)?;
            Ok(PathBuf::from(prefix).join("share/jupyter"))
        }
        Target::Prefix(p) => Ok(p.join("share/jupyter")),
    }
}

/// The kernelspec for the binary at `exe`.
pub fn kernel_json(exe: &Path) -> String {
    let spec = serde_json::json!({
        "argv": [exe.display().to_string(), "kernel", "--connection-file", "{connection_file}"],
        "display_name": "brisk (Rhai)",
        "language": "rhai",
        "interrupt_mode": "signal",
        "metadata": { "debugger": false },
    });
    serde_json::to_string_pretty(&spec).unwrap_or_default()
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    std::fs::write(path, bytes)
        .map_err(|error| InstallError::Write { path: path.display().to_string(), error })
}

/// Install the kernelspec; returns its directory.
pub fn install(target: &Target) -> Result<PathBuf, InstallError> {
    let dir = data_dir(target)?.join("kernels").join(NAME);
    std::fs::create_dir_all(&dir)
        .map_err(|error| InstallError::Write { path: dir.display().to_string(), error })?;
    let exe = std::env::current_exe().map_err(InstallError::NoBinary)?;
    let exe = exe.canonicalize().unwrap_or(exe);
    write(&dir.join("kernel.json"), kernel_json(&exe).as_bytes())?;
    write(&dir.join("logo-32x32.png"), LOGO_32)?;
    write(&dir.join("logo-64x64.png"), LOGO_64)?;
    Ok(dir)
}

/// Remove the kernelspec; returns the directory removed.
pub fn uninstall(target: &Target) -> Result<PathBuf, InstallError> {
    let dir = data_dir(target)?.join("kernels").join(NAME);
    if !dir.join("kernel.json").exists() {
        return Err(InstallError::NotInstalled(dir.display().to_string()));
    }
    std::fs::remove_dir_all(&dir)
        .map_err(|error| InstallError::Write { path: dir.display().to_string(), error })?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_and_uninstall_under_a_prefix() {
        let prefix = std::env::temp_dir().join(format!("brisk-kernelspec-{}", std::process::id()));
        let target = Target::Prefix(prefix.clone());
        let dir = install(&target).expect("install");
        assert_eq!(dir, prefix.join("share/jupyter/kernels/brisk"));
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("kernel.json")).expect("read"))
                .expect("json");
        assert_eq!(spec["display_name"], "brisk (Rhai)");
        assert_eq!(spec["language"], "rhai");
        let argv = spec["argv"].as_array().expect("argv");
        assert!(Path::new(argv[0].as_str().expect("exe")).is_absolute());
        assert_eq!(argv[3], "{connection_file}");
        assert!(dir.join("logo-64x64.png").exists());
        uninstall(&target).expect("uninstall");
        assert!(!dir.exists());
        assert!(matches!(uninstall(&target), Err(InstallError::NotInstalled(_))));
    }
}
