/// Where the x86-64 System V convention puts each argument, and which ones `ffi_call`
/// would get wrong.
///
/// libffi 3.4.4 copies the whole of an aggregate into the general-register save area when
/// its first eightbyte is INTEGER. For an aggregate larger than eight bytes that starts in
/// the last free general register (`%r9`) the copy runs into the first SSE slot and
/// overwrites `%xmm0` (libffi pull request 848). Passing the two eightbytes as two scalar
/// arguments puts the same bits in the same registers, so such an argument is split.
package struct SysVArgumentPlan {
    /// One argument of the call as libffi receives it.
    struct Piece: Equatable {
        enum Kind: Equatable {
            case whole
            case integerWord
            case float
            case double
        }

        let argument: Int
        let offset: Int
        let kind: Kind
    }

    private(set) var pieces: [Piece] = []
    private(set) var needsSplitting = false

    init(_ signature: Signature) {
        var general = SysVArgumentPlan.returnsInMemory(signature.returnType) ? 1 : 0
        var sse = 0
        for (index, type) in signature.argumentTypes.enumerated() {
            guard let need = SysVArgumentPlan.registerNeed(type), general + need.general <= 6, sse + need.sse <= 8
            else {
                pieces.append(Piece(argument: index, offset: 0, kind: .whole))
                continue
            }
            if general == 5, type.isAggregate, type.size > 8,
                case .registers(let classes) = SysVClassification(type), classes == [.integer, .sse]
            {
                needsSplitting = true
                pieces.append(Piece(argument: index, offset: 0, kind: .integerWord))
                // A full second eightbyte (a double, two floats, or a float and padding) travels as
                // one 8-byte SSE value; a 4-byte tail as a float, so nothing past the value is read.
                pieces.append(Piece(argument: index, offset: 8, kind: type.size == 16 ? .double : .float))
            } else {
                pieces.append(Piece(argument: index, offset: 0, kind: .whole))
            }
            general += need.general
            sse += need.sse
        }
    }

    /// The registers an argument of `type` takes, or `nil` when it goes on the stack.
    static func registerNeed(_ type: CType) -> (general: Int, sse: Int)? {
        switch type.kind {
        case .primitive(let primitive):
            switch primitive {
            case .longDouble: return nil
            case .float, .double: return (0, 1)
            case .int128, .unsignedInt128: return (2, 0)
            default: return (1, 0)
            }
        case .complex(.longDouble): return nil
        case .complex, .structure, .union:
            return SysVClassification(type).registerCounts
        default:
            return (1, 0)
        }
    }

    /// Whether a return value of `type` goes through a hidden pointer in `%rdi`.
    package static func returnsInMemory(_ type: CType) -> Bool {
        switch type.kind {
        case .complex(.longDouble), .primitive, .void: return false
        case .complex, .structure, .union:
            return SysVClassification(type) == .memory
        default: return false
        }
    }
}
