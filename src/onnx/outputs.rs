//! Crash-safe output files. Every file a command writes is first written without a name (Linux
//! `O_TMPFILE`; a hidden temporary elsewhere) and all of them get their names together at the
//! end, in one burst of `linkat`/`rename` calls. On Linux a detached child process makes that
//! burst, so a process killed at any moment leaves either the previous files untouched and
//! nothing else, or all the new files. Stale temporaries of killed runs (only possible where
//! `O_TMPFILE` or `fork` is missing) are removed by the next run writing the same file.
//! Durability against power loss (`fsync`) is not attempted.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::io::{external_files, model_dir};
use super::proto::ModelProto;
use crate::{bail_input, input_error};

/// Suffix of the hidden temporaries (`.<name>.<pid>.memplan-tmp`).
const TEMP_SUFFIX: &str = ".memplan-tmp";

/// A set of output files written in full before any of them is named.
#[derive(Default)]
pub struct Outputs {
    staged: Vec<Staged>,
}

/// One output file waiting for its name.
struct Staged {
    target: PathBuf,
    content: Content,
}

enum Content {
    /// An unnamed file (`O_TMPFILE`), linked to its name at commit.
    Unnamed(File),
    /// A hidden temporary, renamed at commit (where `O_TMPFILE` is not available).
    Named(File, PathBuf),
}

impl Outputs {
    /// No files yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty file that becomes `target` at [`Outputs::commit`].
    pub fn file(&mut self, target: &Path) -> Result<&mut File> {
        let dir = model_dir(target);
        remove_stale_temporaries(target);
        let content = match open_unnamed(&dir) {
            Some(file) => Content::Unnamed(file),
            None => {
                let temp = temp_path(target);
                let file = File::create(&temp).map_err(|e| {
                    input_error!(
                        "{}: cannot create a file in {}: {e}",
                        target.display(),
                        dir.display()
                    )
                })?;
                Content::Named(file, temp)
            }
        };
        self.staged.push(Staged {
            target: target.to_path_buf(),
            content,
        });
        match &mut self.staged.last_mut().expect("just pushed").content {
            Content::Unnamed(file) | Content::Named(file, _) => Ok(file),
        }
    }

    /// Stages `contents` as the file `target`.
    pub fn bytes(&mut self, target: &Path, contents: &[u8]) -> Result<()> {
        self.file(target)?
            .write_all(contents)
            .map_err(|e| input_error!("{}: cannot write: {e}", target.display()))
    }

    /// Stages the encoding of `model` as the file `target`, streamed (see
    /// [`super::write_model`]: payloads that are slices of `source` are copied from its file);
    /// with `hash`, returns the SHA-256 of the bytes written.
    pub fn model(
        &mut self,
        target: &Path,
        model: &ModelProto,
        source: Option<&super::ModelFile>,
        hash: bool,
    ) -> Result<Option<[u8; 32]>> {
        let file = self.file(target)?;
        super::encode::write_model(model, file, source, hash)
            .map_err(|e| input_error!("{}: cannot write: {e}", target.display()))
    }

    /// Stages a model's external-data files next to an output model written in another folder,
    /// so the written model's relative locations resolve. Each is a new file with a link count
    /// of one (onnx's loader refuses data files with several hard links): a reflink where the
    /// filesystem shares blocks (btrfs, XFS), else a streamed copy, written and named like every
    /// other output. An existing file with the same bytes is kept (compared as streams), unless
    /// it is the input's own file under a second name, which is replaced by a copy; an existing
    /// file that differs is an input error. The input's files are only read.
    pub fn external_data(&mut self, model: &ModelProto, from: &Path, to: &Path) -> Result<()> {
        let (src_dir, dst_dir) = (model_dir(from), model_dir(to));
        if fs::canonicalize(&src_dir).ok() == fs::canonicalize(&dst_dir).ok() {
            return Ok(());
        }
        for name in external_files(model) {
            let (src, dst) = (src_dir.join(&name), dst_dir.join(&name));
            if dst.exists() && !same_file(&src, &dst) {
                if same_contents(&src, &dst).unwrap_or(false) {
                    continue;
                }
                bail_input!(
                    "{}: exists and differs from the model's external data {}",
                    dst.display(),
                    src.display()
                );
            }
            let dst_parent = model_dir(&dst);
            fs::create_dir_all(&dst_parent)
                .map_err(|e| input_error!("{}: cannot create: {e}", dst_parent.display()))?;
            let mut from = File::open(&src)
                .map_err(|e| input_error!("{}: cannot read: {e}", src.display()))?;
            let to = self.file(&dst)?;
            if !reflink(&from, to) {
                io::copy(&mut from, to).map_err(|e| {
                    input_error!("{}: cannot copy external data: {e}", src.display())
                })?;
            }
        }
        Ok(())
    }

    /// Names every staged file, in the order staged, one right after the other: on Linux in a
    /// detached child process (the `detached_commit` module), so that killing the command
    /// cannot stop the burst half-way.
    pub fn commit(mut self) -> Result<()> {
        // The files being replaced stay open until every name is in place, so the burst of
        // renames does not also free their blocks (which takes long for big files).
        // A file that replaces another starts its writeback first (see `start_writeback`); one
        // that takes a free name needs none.
        let mut _replaced: Vec<File> = Vec::new();
        for staged in &self.staged {
            if let Ok(old) = File::open(&staged.target) {
                _replaced.push(old);
                let (Content::Unnamed(file) | Content::Named(file, _)) = &staged.content;
                start_writeback(file);
            }
        }
        let staged = std::mem::take(&mut self.staged);
        let named = name_detached(&staged);
        let mut rest = staged.into_iter().skip(named);
        while let Some(staged) = rest.next() {
            let target = staged.target;
            let named = match staged.content {
                Content::Unnamed(mut file) => name_unnamed(&mut file, &target),
                Content::Named(file, temp) => {
                    drop(file);
                    fs::rename(&temp, &target).inspect_err(|_| {
                        let _ = fs::remove_file(&temp);
                    })
                }
            };
            if let Err(e) = named {
                discard(rest);
                bail_input!("{}: cannot write: {e}", target.display());
            }
        }
        Ok(())
    }
}

/// Names the staged files in a detached child (Linux); returns how many it named. The caller
/// names the rest in process, which reports their errors or takes the fallbacks (a copy where
/// there is no `/proc` to link unnamed files through); that is every file when no child could
/// be started.
#[cfg(target_os = "linux")]
fn name_detached(staged: &[Staged]) -> usize {
    use super::detached_commit::{Step, run};
    let steps: io::Result<Vec<Step>> = staged
        .iter()
        .map(|s| match &s.content {
            Content::Unnamed(file) => Step::unnamed(file, &temp_path(&s.target), &s.target),
            Content::Named(_, temp) => Step::named(temp, &s.target),
        })
        .collect();
    let Ok(steps) = steps else {
        return 0;
    };
    let mut folders: Vec<PathBuf> = staged.iter().map(|s| model_dir(&s.target)).collect();
    folders.sort();
    folders.dedup();
    let folders: Vec<&Path> = folders.iter().map(PathBuf::as_path).collect();
    run(&steps, &folders)
}

#[cfg(not(target_os = "linux"))]
fn name_detached(_staged: &[Staged]) -> usize {
    0
}

/// Removes the hidden temporaries of staged files that will not be named.
fn discard(rest: impl Iterator<Item = Staged>) {
    for staged in rest {
        if let Content::Named(file, temp) = staged.content {
            drop(file);
            let _ = fs::remove_file(temp);
        }
    }
}

impl Drop for Outputs {
    /// Removes the hidden temporaries of files never committed (unnamed ones vanish by
    /// themselves).
    fn drop(&mut self) {
        for staged in &self.staged {
            if let Content::Named(_, temp) = &staged.content {
                let _ = fs::remove_file(temp);
            }
        }
    }
}

/// Writes a file's data to disk and waits for it, before the burst of renames. Filesystems
/// that allocate blocks late (ext4) otherwise flush it inside the rename that replaces an
/// existing file, which makes that rename slow and the burst of renames long (a kill then
/// often lands between two renames). A link to a free name does not
/// do it, so files that take a free name skip this (for a big model, it costs about as long as
/// copying the file).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a plain system call on an open descriptor; the result is only a hint.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            0,
            0,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File) {}

/// `dir/.name.<pid>.memplan-tmp` for `dir/name`.
fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    target.with_file_name(format!(".{name}.{}{TEMP_SUFFIX}", std::process::id()))
}

/// Removes `.name.<pid>.memplan-tmp` files beside `target` left by processes that no longer run.
/// A killed command's detached child may still be naming the temporaries of its dead parent,
/// so the sweep holds the folder's lock, which that child holds until every name is in place.
fn remove_stale_temporaries(target: &Path) {
    #[cfg(target_os = "linux")]
    let _lock = super::detached_commit::lock(&model_dir(target));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(model_dir(target)) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let pid = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(TEMP_SUFFIX))
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && !process_alive(pid)
        {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn process_alive(pid: u32) -> bool {
    pid == std::process::id()
}

/// An unnamed file in `dir` (Linux `O_TMPFILE`), or `None` where the system or filesystem
/// has none.
#[cfg(target_os = "linux")]
fn open_unnamed(dir: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o666)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn open_unnamed(_dir: &Path) -> Option<File> {
    None
}

/// Gives an unnamed file the name `target`: a direct link when the name is free; a link to a
/// hidden temporary renamed over it when it exists; a copy when linking is not possible (no
/// `/proc`).
fn name_unnamed(file: &mut File, target: &Path) -> io::Result<()> {
    match link_unnamed(file, target) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let temp = temp_path(target);
            let _ = fs::remove_file(&temp);
            if link_unnamed(file, &temp).is_ok() {
                return fs::rename(&temp, target).inspect_err(|_| {
                    let _ = fs::remove_file(&temp);
                });
            }
        }
        Err(_) => {}
    }
    let temp = temp_path(target);
    let copied = (|| {
        file.rewind()?;
        let mut out = File::create(&temp)?;
        io::copy(file, &mut out)?;
        fs::rename(&temp, target)
    })();
    if copied.is_err() {
        let _ = fs::remove_file(&temp);
    }
    copied
}

#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, target: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = CString::new(target.as_os_str().as_bytes())?;
    super::detached_commit::link(&from, &to).map_err(io::Error::from_raw_os_error)
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _target: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// True when `a` and `b` hold the same bytes, compared as streams a chunk at a time.
fn same_contents(a: &Path, b: &Path) -> io::Result<bool> {
    if fs::metadata(a)?.len() != fs::metadata(b)?.len() {
        return Ok(false);
    }
    const CHUNK: usize = 1 << 20;
    let (mut fa, mut fb) = (File::open(a)?, File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        if n != read_full(&mut fb, &mut bb[..n])? || ba[..n] != bb[..n] {
            return Ok(false);
        }
        if n < CHUNK {
            return Ok(read_full(&mut fb, &mut bb[..1])? == 0);
        }
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// True when `a` and `b` name the same file (hard links of one inode).
#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    matches!((fs::metadata(a), fs::metadata(b)),
        (Ok(x), Ok(y)) if (x.dev(), x.ino()) == (y.dev(), y.ino()))
}

#[cfg(not(unix))]
fn same_file(_a: &Path, _b: &Path) -> bool {
    false
}

/// Makes `to` (empty) share `from`'s blocks (`FICLONE`), where the filesystem can; false
/// elsewhere, and `to` is then still empty. The clone is a file of its own (link count one).
#[cfg(target_os = "linux")]
fn reflink(from: &File, to: &File) -> bool {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a plain system call on two open descriptors; a failure changes neither file.
    unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn reflink(_from: &File, _to: &File) -> bool {
    false
}
