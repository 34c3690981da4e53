extension RelocationError {
    /// The kind of refusal this is, for a batch's report.
    var reason: InlineRefusal.Reason {
        switch code {
        case .patchTooShort, .functionTooShort: .tooShort
        case .undecodable: .undecodable
        case .ripRelativeOutOfRange: .ripRelativeOutOfRange
        case .branchIntoInstruction, .unsupportedInstruction: .unrelocatable
        }
    }
}
