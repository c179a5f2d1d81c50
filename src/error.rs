//! Error kinds that decide the exit code: bad input (2) versus internal bugs (1).

/// A problem with the user's input (file, model, flags): reported in one line, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Builds an `anyhow::Error` carrying an `InputError` from a format string.
#[macro_export]
macro_rules! input_error {
    ($($arg:tt)*) => {
        ::anyhow::Error::new($crate::error::InputError(format!($($arg)*)))
    };
}

/// Returns early with an `InputError`.
#[macro_export]
macro_rules! bail_input {
    ($($arg:tt)*) => {
        return Err($crate::input_error!($($arg)*))
    };
}

/// An input the pass cannot handle (an operator without a shape rule), as opposed to one it
/// finds invalid: also exit code 2, but no proof that the model would fail at run time.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedError(pub String);

/// True when the error (or anything it wraps) is an [`InputError`] or an [`UnsupportedError`].
pub fn is_input_error(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|e| e.is::<InputError>() || e.is::<UnsupportedError>())
}

/// True when the error (or anything it wraps) is an [`UnsupportedError`].
pub fn is_unsupported(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<UnsupportedError>())
}
