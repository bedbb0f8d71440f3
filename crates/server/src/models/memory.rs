//! Giving an unloaded model's memory back to the system.
//!
//! A model's weights and cache are freed when it is unloaded, but glibc's
//! allocator keeps freed memory for later use: after its first large free
//! it serves blocks of up to 32 MiB from its heaps rather than from maps
//! of their own, and a heap only shrinks from its top. Without a trim, a
//! server that unloaded a 300 MB model measured 450 MB resident with
//! nothing loaded; `malloc_trim` hands every free page back.
//!
//! A trim only frees whole pages, though, and a heap that served large
//! blocks is shared with the small ones that outlive a model (a request's
//! strings, a listing): with prompt lookup on, whose extra check graphs
//! add large blocks of their own, three load-unload cycles left 28 to
//! 58 MB resident against 15 MB without it. Fixing the threshold at which
//! blocks get maps of their own (which also stops glibc from raising it)
//! keeps every large block out of the heaps, so freeing it unmaps it:
//! 15 MB after each cycle, lookup on or off.

/// Large blocks from here up get maps of their own: a graph's buffers, a
/// cache region, a vocabulary's tables. glibc's starting value, which it
/// would otherwise raise after the first such free.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAP_THRESHOLD: libc::c_int = 128 * 1024;

/// Keeps every large block in a map of its own for the rest of the process
/// (glibc; elsewhere a no-op), so that an unloaded model's buffers go back
/// to the system when they are freed, whatever the heaps around them hold.
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's own tuning under its own
    // lock; it may be called from any thread at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_THRESHOLD);
    }
}

/// Returns the allocator's free pages to the system (glibc; elsewhere a
/// no-op).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // the allocator's own locks; it may be called from any thread at any
    // time and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
