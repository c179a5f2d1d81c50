//! A memo shared by threads that computes each key's value once: a thread asking for a key
//! that another thread is computing waits for that value rather than computing it again (the
//! split searches run side by side and meet the same trials and rounds).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use super::cuts::lock;

/// Values by key, each computed by the first thread to ask for it.
pub struct Memo<K, V> {
    slots: Mutex<HashMap<K, Arc<Mutex<Option<V>>>>>,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            slots: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    /// The value of `key` and whether it was known: made by `make` when no thread made it
    /// before. While one thread makes it, the others asking for it wait, unless `wait` is
    /// false: then the asking thread makes it too, on its own (a thread that must not wait
    /// for a slower one); when `make` fails, nothing is kept, and the next thread to ask
    /// makes it in turn.
    pub fn get_or_make<E>(
        &self,
        key: K,
        wait: bool,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<(V, bool), E> {
        let slot = lock(&self.slots).entry(key).or_default().clone();
        let mut value = match slot.try_lock() {
            Ok(value) => value,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if !wait => return Ok((make()?, false)),
            Err(std::sync::TryLockError::WouldBlock) => lock(&slot),
        };
        if let Some(v) = value.as_ref() {
            return Ok((v.clone(), true));
        }
        let made = make()?;
        *value = Some(made.clone());
        Ok((made, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn threads_asking_for_one_key_make_it_once() {
        let memo: Memo<u32, u64> = Memo::default();
        let made = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let (v, _) = memo
                        .get_or_make(7, true, || {
                            made.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok::<_, ()>(49)
                        })
                        .unwrap();
                    assert_eq!(v, 49);
                });
            }
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_make_keeps_nothing() {
        let memo: Memo<u32, u64> = Memo::default();
        assert_eq!(memo.get_or_make(1, true, || Err::<u64, _>("no")), Err("no"));
        assert_eq!(memo.get_or_make(1, true, || Ok::<_, ()>(3)), Ok((3, false)));
        assert_eq!(memo.get_or_make(1, true, || Ok::<_, ()>(4)), Ok((3, true)));
    }

    #[test]
    fn a_thread_that_does_not_wait_makes_the_value_itself() {
        let memo: Memo<u32, u64> = Memo::default();
        let (started, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                memo.get_or_make(5, true, || {
                    started.wait();
                    done.wait();
                    Ok::<_, ()>(25)
                })
            });
            started.wait();
            // The other thread holds the key: this one makes its own value, and it is not kept.
            assert_eq!(memo.get_or_make(5, false, || Ok::<_, ()>(25)), Ok((25, false)));
            done.wait();
        });
        assert_eq!(memo.get_or_make(5, true, || Ok::<_, ()>(0)), Ok((25, true)));
    }
}
