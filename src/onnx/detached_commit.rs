//! The burst of renames that names a command's output files, run by a detached child process
//! (Linux). A SIGKILL of the command, or a signal to its process group, cannot stop the child
//! in the middle of the burst, so a killed command leaves either the previous files or every
//! new one, never a mix of the two runs.
//!
//! The parent prepares every path before `fork`; the child only makes system calls (`setsid`,
//! `linkat`, `rename`, `unlink`, `write`, `_exit`), which are safe after a `fork` of a
//! multi-threaded process. The child reports through a pipe how far it got; the parent waits
//! for it and names the rest itself (reporting their errors, or copying where `/proc` is
//! missing). Each output folder is locked (`flock`) from before the fork until the child ends:
//! concurrent commits into one folder take turns, and whoever takes the lock after a kill sees
//! the burst complete.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// Test hook: milliseconds the child waits after naming each file, so that a test can kill the
/// command in the middle of the burst.
const PAUSE_VARIABLE: &str = "ONNX_MEMPLAN_TEST_COMMIT_PAUSE_MS";

/// One file to name, with every path ready for the child.
pub struct Step {
    /// The unnamed file's `/proc/self/fd/N`, or `None` for a hidden temporary already named.
    unnamed: Option<CString>,
    /// The hidden temporary: renamed over the target (named files), or the intermediate link
    /// of an unnamed file whose target exists.
    temp: CString,
    /// The output's name.
    target: CString,
}

impl Step {
    /// An unnamed (`O_TMPFILE`) file to link to `target`, through `temp` when `target` exists.
    pub fn unnamed(file: &File, temp: &Path, target: &Path) -> io::Result<Step> {
        Ok(Step {
            unnamed: Some(CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?),
            temp: c_path(temp)?,
            target: c_path(target)?,
        })
    }

    /// A hidden temporary to rename to `target`.
    pub fn named(temp: &Path, target: &Path) -> io::Result<Step> {
        Ok(Step {
            unnamed: None,
            temp: c_path(temp)?,
            target: c_path(target)?,
        })
    }

    /// Names the file (in the child: system calls only, no allocation); `Err` carries the
    /// `errno`.
    fn run(&self) -> Result<(), i32> {
        let Some(from) = &self.unnamed else {
            // SAFETY: both pointers are to NUL-terminated strings owned by `self`.
            return check(unsafe { libc::rename(self.temp.as_ptr(), self.target.as_ptr()) });
        };
        match link(from, &self.target) {
            Err(libc::EEXIST) => {
                // SAFETY: as above.
                unsafe { libc::unlink(self.temp.as_ptr()) };
                link(from, &self.temp)?;
                // SAFETY: as above.
                let renamed =
                    check(unsafe { libc::rename(self.temp.as_ptr(), self.target.as_ptr()) });
                if renamed.is_err() {
                    // SAFETY: as above.
                    unsafe { libc::unlink(self.temp.as_ptr()) };
                }
                renamed
            }
            other => other,
        }
    }
}

/// Links the file that the `/proc/self/fd/N` path `from` names to the new name `to` (system
/// calls only); `Err` carries the `errno`.
pub fn link(from: &CStr, to: &CStr) -> Result<(), i32> {
    // SAFETY: both pointers are to NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
}

/// Runs `steps` in order in a detached child, with `folders` (those of the targets) locked.
/// Returns how many were named: all of them, or up to the first that failed, or none when no
/// child could be started.
pub fn run(steps: &[Step], folders: &[&Path]) -> usize {
    let _locks: Vec<File> = folders.iter().filter_map(|dir| lock(dir)).collect();
    let pause = std::env::var(PAUSE_VARIABLE)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return 0;
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child runs only `child`, which makes system calls and exits.
    match unsafe { libc::fork() } {
        -1 => {
            close(read_end);
            close(write_end);
            0
        }
        0 => child(steps, write_end, pause),
        pid => {
            close(write_end);
            let report = read_report(read_end);
            close(read_end);
            let mut status = 0;
            // SAFETY: `pid` is our child; `status` is a live local.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            match report {
                Some(done) => done,
                None if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 => steps.len(),
                None => 0,
            }
        }
    }
}

/// The child: leaves the process group, names every file, reports the first failure.
fn child(steps: &[Step], report: i32, pause: Option<Duration>) -> ! {
    // SAFETY: system calls only; `_exit` ends the child without running the parent's exit
    // handlers.
    unsafe {
        libc::setsid();
        for (i, step) in steps.iter().enumerate() {
            if step.run().is_err() {
                let done = i as u64;
                libc::write(report, (&raw const done).cast(), size_of::<u64>());
                libc::_exit(1);
            }
            if let Some(pause) = pause {
                let time = libc::timespec {
                    tv_sec: pause.as_secs() as libc::time_t,
                    tv_nsec: pause.subsec_nanos() as libc::c_long,
                };
                libc::nanosleep(&time, std::ptr::null_mut());
            }
        }
        libc::_exit(0)
    }
}

/// The child's report: how many steps it did before one failed; `None` when the child wrote
/// nothing (every step done, or it died).
fn read_report(fd: i32) -> Option<usize> {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the buffer has `len - filled` bytes left at that offset.
        let n = unsafe {
            libc::read(
                fd,
                bytes.as_mut_ptr().add(filled).cast(),
                bytes.len() - filled,
            )
        };
        match n {
            n if n > 0 => filled += n as usize,
            n if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    usize::try_from(u64::from_ne_bytes(bytes)).ok()
}

/// An exclusive lock on a folder, held while the returned file is open (and by the child,
/// which inherits it); `None` where the folder cannot be opened or locked.
pub(super) fn lock(dir: &Path) -> Option<File> {
    let folder = File::open(dir).ok()?;
    loop {
        // SAFETY: a plain system call on an open descriptor.
        if unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Some(folder);
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return None;
        }
    }
}

fn close(fd: i32) {
    // SAFETY: `fd` is a descriptor this module opened and closes once.
    unsafe { libc::close(fd) };
}

fn c_path(path: &Path) -> io::Result<CString> {
    Ok(CString::new(path.as_os_str().as_bytes())?)
}

/// `Ok` for a system call's zero status, else its `errno`.
fn check(status: i32) -> Result<(), i32> {
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}
