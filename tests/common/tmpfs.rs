//! A tmpfs mounted on a folder for a test: a small disk to fill. Mounting
//! needs root (as the suite runs).

use std::io::Write;
use std::path::{Path, PathBuf};

/// A tmpfs mounted on a folder for the length of a test.
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mkdir");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "mount tmpfs (these tests run as root): {out:?}"
        );
        Tmpfs {
            dir: dir.to_path_buf(),
        }
    }

    /// Fills the file system with one file until it is full; returns it.
    pub fn fill(&self) -> PathBuf {
        let path = self.dir.join("filler");
        let mut f = std::fs::File::create(&path).expect("create filler");
        for chunk in [1 << 20, 4096, 1] {
            let buf = vec![0x5a_u8; chunk];
            loop {
                match f.write_all(&buf) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => panic!("fill: {e}"),
                }
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a daemon still holding files there must not keep it mounted.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}
