internal import CFFIHookSupport

/// Reaching a hooked slot's original: every call path ends here, hooked or passing through.
extension CallInterface {
    /// Calls `function`, the original a call read once, with the arguments as they are now,
    /// through the interface's register plan where it has one; a NULL original (a slot an
    /// instead hook filled) returns zero.
    ///
    /// Allocates nothing and takes no lock, as the call path must not.
    ///
    /// `entryPlan` is the slot record's plan when the call entered through the library's own
    /// closure entry (`arguments` is then that entry's list): the original is called with the
    /// argument registers as they arrived (``ffh_forward_sysv``), which moves only what a
    /// block may have changed out of place.
    ///
    /// `thread` is the caller's record, marked as running the library's own code
    /// (``ffh_thread/busy``) except for the length of the original where the call path is
    /// marked (``ThreadState/marksCallPath``); nil for a call that has none.
    @inline(__always)
    func callOriginal(
        _ function: UInt, returnValue: UnsafeMutableRawPointer?,
        arguments: UnsafeMutablePointer<UnsafeMutableRawPointer?>, entryPlan: UnsafeRawPointer?,
        thread: UnsafeMutablePointer<ffh_thread>?
    ) {
        guard let pointer = UnsafeRawPointer(bitPattern: function) else {
            zeroResult(returnValue)
            return
        }
        #if arch(x86_64)
            if let entryPlan {
                #if DEBUG
                    ffh_forward_original(thread, entryPlan, pointer, arguments, returnValue)
                #else
                    ffh_forward_sysv(entryPlan, pointer, arguments, returnValue)
                #endif
                return
            }
        #endif
        #if DEBUG
            // Through libffi's entry: the mark is lifted around the Swift call, which is as
            // close as this path comes.
            if let thread { ffh_thread_set_busy(thread, 0) }
            call(pointer, returnValue: returnValue, argumentList: arguments)
            if let thread { ffh_thread_set_busy(thread, 1) }
        #else
            call(pointer, returnValue: returnValue, argumentList: arguments)
        #endif
    }

    /// Zeroes the result in a closure's return buffer, as much of it as the caller reads:
    /// what a call returns when neither an original nor an instead block set it.
    @inline(__always)
    func zeroResult(_ returnValue: UnsafeMutableRawPointer?) {
        if closureResultSize > 0, let returnValue {
            // Not through memset, which the program may have hooked.
            ffh_zero(returnValue, closureResultSize)
        }
    }
}
