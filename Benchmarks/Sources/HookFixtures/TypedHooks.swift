import CHookBench
public import FFIHook

/// Typed before and after blocks for each signature, with the Swift types spelled out.
public enum TypedHooks {
    /// Installs a no-op typed before block and a typed after block that returns the result.
    public static func installBeforeAfter(on signature: BenchSignature) throws -> [HookToken] {
        let slot = signature.slot
        switch signature {
        case .intInt:
            return [
                try Hook.before(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) { _, _ in },
                try Hook.after(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) { result, _, _ in
                    result
                },
            ]
        case .void:
            return [try Hook.before(on: slot) {}, try Hook.after(on: slot) {}]
        case .double:
            return [
                try Hook.before(on: slot, arguments: Double.self, Double.self, returning: Double.self) { _, _ in },
                try Hook.after(on: slot, arguments: Double.self, Double.self, returning: Double.self) { result, _, _ in
                    result
                },
            ]
        case .sixInts:
            let int = Int32.self
            return [
                try Hook.before(on: slot, arguments: int, int, int, int, int, int, returning: int) { _, _, _, _, _, _ in
                },
                try Hook.after(on: slot, arguments: int, int, int, int, int, int, returning: int) {
                    result, _, _, _, _, _, _ in result
                },
            ]
        case .struct16:
            let types = signature.signature
            return [
                try Hook.before(on: slot, signature: types, arguments: hb_point.self, returning: Double.self) { _ in },
                try Hook.after(on: slot, signature: types, arguments: hb_point.self, returning: Double.self) {
                    result, _ in result
                },
            ]
        case .struct40:
            let types = signature.signature
            return [
                try Hook.before(on: slot, signature: types, arguments: hb_record.self, returning: hb_record.self) { _ in
                },
                try Hook.after(on: slot, signature: types, arguments: hb_record.self, returning: hb_record.self) {
                    result, _ in result
                },
            ]
        }
    }
}
