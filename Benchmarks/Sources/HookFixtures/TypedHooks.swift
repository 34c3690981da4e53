import CHookBench
public import FFIHook

/// Typed blocks for each signature, with the Swift types spelled out.
public enum TypedHooks {
    /// Installs a typed instead block that calls the original with the arguments it got.
    public static func installInstead(on signature: BenchSignature) throws -> HookToken {
        let slot = signature.slot
        switch signature {
        case .intInt:
            return try Hook.instead(on: slot, arguments: Int32.self, Int32.self, returning: Int32.self) {
                original, a, b in original(a, b)
            }
        case .void:
            return try Hook.instead(on: slot) { original in original() }
        case .double:
            return try Hook.instead(on: slot, arguments: Double.self, Double.self, returning: Double.self) {
                original, a, b in original(a, b)
            }
        case .sixInts:
            let int = Int32.self
            return try Hook.instead(on: slot, arguments: int, int, int, int, int, int, returning: int) {
                original, a, b, c, d, e, f in original(a, b, c, d, e, f)
            }
        case .struct16:
            return try Hook.instead(
                on: slot, signature: signature.signature, arguments: hb_point.self, returning: Double.self
            ) { original, point in
                let result = original(point)
                return result
            }
        case .struct40:
            return try Hook.instead(
                on: slot, signature: signature.signature, arguments: hb_record.self, returning: hb_record.self
            ) { original, record in
                let result = original(record)
                return result
            }
        }
    }

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
