//! A test-only hook: `CHECKOUT_CRASH_AT=<point>` makes the process kill
//! itself with SIGKILL when it reaches that point — no unwinding, no answer,
//! no complete: what a power cut or an OOM kill leaves behind. The points:
//!
//! - `after_charge`: the provider has charged, the step is not recorded;
//! - `after_charge_step`: the charge step is recorded, nothing shipped.
//!
//! Unset (as in production), it does nothing.

/// Dies here, at once, if `CHECKOUT_CRASH_AT` names this point.
pub fn point(name: &str) {
    if std::env::var("CHECKOUT_CRASH_AT").is_ok_and(|p| p == name) {
        eprintln!("checkout: crash point {name} reached, killing myself (SIGKILL)");
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
