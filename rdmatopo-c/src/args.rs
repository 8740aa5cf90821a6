//! Checked conversions of C arguments. Each names the argument in its error, so the
//! last error message says which pointer was NULL or which string was bad.

use crate::error::{FfiError, rdmatopo_status};
use rdmatopo::PciAddr;
use std::ffi::{CStr, c_char};

/// A required input pointer as a reference.
///
/// # Safety
/// `p` is NULL or points to a live `T` for `'a`.
pub unsafe fn arg_ref<'a, T>(p: *const T, name: &str) -> Result<&'a T, FfiError> {
    // SAFETY: the caller promises `p` is NULL or valid.
    unsafe { p.as_ref() }.ok_or_else(|| null(name))
}

/// A required output pointer, checked before any work is done.
pub fn arg_out<T>(p: *mut T, name: &str) -> Result<OutPtr<T>, FfiError> {
    if p.is_null() {
        Err(null(name))
    } else {
        Ok(OutPtr(p))
    }
}

/// An optional output pointer (documented "may be NULL").
pub fn arg_out_opt<T>(p: *mut T) -> Option<OutPtr<T>> {
    (!p.is_null()).then_some(OutPtr(p))
}

/// A required NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string alive for `'a`.
pub unsafe fn arg_str<'a>(p: *const c_char, name: &str) -> Result<&'a str, FfiError> {
    if p.is_null() {
        return Err(null(name));
    }
    // SAFETY: non-NULL and NUL-terminated, as the caller promises.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map_err(|e| FfiError::invalid(format!("argument `{name}` is not UTF-8 ({e})")))
}

/// A required bus id in sysfs (`0000:3b:00.0`) or NVML (`00000000:3B:00.0`) form.
///
/// # Safety
/// As [`arg_str`].
pub unsafe fn arg_bus_id(p: *const c_char, name: &str) -> Result<PciAddr, FfiError> {
    // SAFETY: forwarded from the caller.
    let text = unsafe { arg_str(p, name) }?;
    text.parse()
        .map_err(|e| FfiError::invalid(format!("argument `{name}`: {e}")))
}

fn null(name: &str) -> FfiError {
    FfiError::new(
        rdmatopo_status::NullArgument,
        format!("argument `{name}` is NULL"),
    )
}

/// An output pointer known to be non-NULL. Written only once a call has succeeded.
#[derive(Debug)]
pub struct OutPtr<T>(*mut T);

impl<T> OutPtr<T> {
    /// Store `value`.
    ///
    /// # Safety
    /// The pointer the caller passed is valid for writes of a `T`.
    pub unsafe fn write(self, value: T) {
        // SAFETY: non-NULL (checked when built) and writable (the caller's promise).
        unsafe { self.0.write(value) }
    }
}

/// A caller's byte buffer for a string result, with its optional required-size
/// out-parameter. `buf` may be NULL only when `len` is 0 (a size query).
#[derive(Debug)]
pub struct OutBuf {
    buf: *mut c_char,
    len: usize,
    required: Option<OutPtr<usize>>,
}

impl OutBuf {
    pub fn new(buf: *mut c_char, len: usize, required: *mut usize) -> Result<Self, FfiError> {
        if buf.is_null() && len > 0 {
            return Err(null("buf"));
        }
        Ok(Self {
            buf,
            len,
            required: arg_out_opt(required),
        })
    }

    /// Copy `text` and a NUL into the buffer. `*required` (when given) receives
    /// `text.len() + 1` whether or not it fits; the buffer is written only when it does.
    ///
    /// # Safety
    /// `buf` is valid for `len` bytes of writes and `required` for a `size_t`.
    pub unsafe fn put(self, text: &str) -> Result<(), FfiError> {
        let needed = text.len() + 1;
        if let Some(r) = self.required {
            // SAFETY: the caller's promise.
            unsafe { r.write(needed) };
        }
        if needed > self.len {
            return Err(FfiError::new(
                rdmatopo_status::BufferTooSmall,
                format!("the buffer holds {} bytes; {needed} are needed", self.len),
            ));
        }
        // SAFETY: `buf` is non-NULL here (len > 0) and holds at least `needed` bytes;
        // a Rust string and a caller's buffer cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.buf.cast::<u8>(), text.len());
            self.buf.add(text.len()).write(0);
        }
        Ok(())
    }
}
