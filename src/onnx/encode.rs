//! Encoding a model into a file as a stream: the protobuf encoding goes through a small buffer,
//! and large byte fields (tensor payloads, which are slices of the input's bytes) are written
//! straight from where they lie: copied by the kernel from the input file (`copy_file_range`,
//! as `cp` does) when they are slices of its bytes, else written from memory. No second copy
//! of the weights is ever made. The bytes are those of prost's `encode_to_vec`, optionally
//! hashed (SHA-256) on the way out.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

use bytes::{Buf, BufMut, buf::UninitSlice};
use prost::Message;
use sha2::{Digest, Sha256};

use super::io::ModelFile;
use super::proto::ModelProto;

/// Bytes gathered before they are written out.
const BUFFER: usize = 256 << 10;
/// Slices at least this long bypass the buffer.
const DIRECT: usize = 64 << 10;

/// Writes the protobuf encoding of `model` to `out`; payloads that are slices of `source`'s
/// bytes are copied from its file. With `hash`, returns the SHA-256 of the bytes written.
pub fn write_model(
    model: &ModelProto,
    out: &mut File,
    source: Option<&ModelFile>,
    hash: bool,
) -> io::Result<Option<[u8; 32]>> {
    let mut stream = Stream {
        out,
        source,
        buffer: Vec::with_capacity(BUFFER),
        hasher: hash.then(Sha256::new),
        error: None,
    };
    model
        .encode(&mut stream)
        .map_err(|e| io::Error::other(e.to_string()))?;
    stream.flush();
    match stream.error {
        Some(e) => Err(e),
        None => Ok(stream.hasher.map(|h| h.finalize().into())),
    }
}

/// A [`BufMut`] that writes what it is given to `out` (and the hasher); the first write error
/// is kept and later bytes are dropped, since `BufMut` cannot fail.
struct Stream<'a> {
    out: &'a mut File,
    source: Option<&'a ModelFile>,
    buffer: Vec<u8>,
    hasher: Option<Sha256>,
    error: Option<io::Error>,
}

impl Stream<'_> {
    /// Writes `bytes` out, unless an earlier write failed.
    fn emit(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Some(hasher) = &mut self.hasher {
            hasher.update(bytes);
        }
        if let Err(e) = self.out.write_all(bytes) {
            self.error = Some(e);
        }
    }

    /// Writes out a large slice: a copy of the source file's range when it is one, else from
    /// memory.
    fn emit_large(&mut self, bytes: &[u8]) {
        let Some((file, offset)) = self
            .source
            .and_then(|s| Some((s.file(), s.offset_of(bytes)?)))
        else {
            return self.emit(bytes);
        };
        if self.error.is_some() {
            return;
        }
        if let Some(hasher) = &mut self.hasher {
            hasher.update(bytes);
        }
        let len = bytes.len() as u64;
        let copied = (|| {
            let mut input = file;
            input.seek(SeekFrom::Start(offset))?;
            let copied = io::copy(&mut input.take(len), self.out)?;
            if copied == len {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the input file became shorter while it was read",
                ))
            }
        })();
        if let Err(e) = copied {
            self.error = Some(e);
        }
    }

    /// Writes out the buffered bytes.
    fn flush(&mut self) {
        let buffered = std::mem::take(&mut self.buffer);
        self.emit(&buffered);
        self.buffer = buffered;
        self.buffer.clear();
    }
}

// SAFETY: every method delegates to the `Vec<u8>` buffer's own `BufMut` implementation; the
// buffer is only emptied (`flush`) between calls, never between `chunk_mut` and `advance_mut`.
unsafe impl BufMut for Stream<'_> {
    fn remaining_mut(&self) -> usize {
        self.buffer.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of the chunk `chunk_mut` returned.
        unsafe { self.buffer.advance_mut(cnt) };
        if self.buffer.len() >= BUFFER {
            self.flush();
        }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.buffer.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= DIRECT {
            self.flush();
            self.emit_large(src);
        } else {
            self.buffer.extend_from_slice(src);
            if self.buffer.len() >= BUFFER {
                self.flush();
            }
        }
    }

    fn put<T: Buf>(&mut self, mut src: T) {
        while src.has_remaining() {
            let chunk = src.chunk();
            let n = chunk.len();
            self.put_slice(chunk);
            src.advance(n);
        }
    }
}
