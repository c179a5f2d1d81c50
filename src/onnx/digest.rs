//! The SHA-256 of a model's bytes, computed on another thread while the pass goes on (the
//! table needs it only at the end, and writing the annotated model can overlap it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Bytes hashed between two looks at the cancel flag.
const STEP: usize = 4 << 20;

/// A SHA-256 being computed; dropping it unwaited stops the work.
pub struct PendingDigest {
    thread: Option<JoinHandle<Option<[u8; 32]>>>,
    cancelled: Arc<AtomicBool>,
}

impl PendingDigest {
    /// Starts hashing `bytes` on a thread of its own.
    pub fn start(bytes: Bytes) -> Self {
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        let thread = std::thread::spawn(move || {
            let mut hasher = Sha256::new();
            for chunk in bytes.chunks(STEP) {
                if flag.load(Ordering::Relaxed) {
                    return None;
                }
                hasher.update(chunk);
            }
            Some(hasher.finalize().into())
        });
        Self {
            thread: Some(thread),
            cancelled,
        }
    }

    /// Waits for the digest, as lower-case hex.
    pub fn wait(mut self) -> String {
        let digest = self
            .thread
            .take()
            .expect("waited once")
            .join()
            .expect("hashing cannot panic")
            .expect("only a dropped digest is cancelled");
        hex(&digest)
    }
}

impl Drop for PendingDigest {
    /// Stops a hash nobody will wait for.
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// Lower-case hex of a digest.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
