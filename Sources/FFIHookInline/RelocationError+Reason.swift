extension RelocationError {
    /// The kind of refusal this is, for a batch's report: an instruction the function's size
    /// cuts while relocating means the function is too short; one the scan cannot read, or
    /// that runs past the end of mapped code, cannot be decoded.
    var reason: InlineRefusal.Reason {
        switch (code, phase) {
        case (.patchTooShort, _), (.functionTooShort, _), (.crossesFunctionEnd, .relocating): .tooShort
        case (.undecodable, _), (.crossesMappedEnd, _), (.crossesFunctionEnd, .scanningForBranches): .undecodable
        case (.ripRelativeOutOfRange, _): .ripRelativeOutOfRange
        case (.branchIntoInstruction, _), (.unsupportedInstruction, _): .unrelocatable
        }
    }
}
