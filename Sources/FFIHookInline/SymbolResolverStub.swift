// TEMPORARY until the resolver lands.
#if canImport(Glibc)
    import Glibc
#endif

struct FunctionExtent: Equatable, Sendable {
    let start: UInt
    let size: Int?
    let symbol: String?
    let objectPath: String
    let loadBias: UInt
    let isIndirect: Bool
}

struct SymbolLookupError: Error, Equatable, CustomStringConvertible {
    enum Code: Equatable, Sendable { case objectNotLoaded, symbolNotFound, notAFunction }
    let code: Code
    let symbol: String
    let object: String?
    var description: String { "symbol \(symbol) not found" }
}

enum SymbolResolver {
    static func resolve(symbol: String, in object: String?) throws(SymbolLookupError) -> UInt {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) else {
            throw SymbolLookupError(code: .symbolNotFound, symbol: symbol, object: object)
        }
        return UInt(bitPattern: address)
    }

    static func extent(of address: UInt) -> FunctionExtent? { nil }
}
