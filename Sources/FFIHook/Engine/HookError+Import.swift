extension HookError {
    /// How many importing objects a message names before it says "and N more".
    static let namedImporterLimit = 4
    /// How the importers of a message name the main program, which ``ImportScope/mainProgram``
    /// catches (its file name is no soname to give ``ImportScope/object(_:)``).
    static let mainProgramImporter = "the main program"

    /// The message of ``Problem/symbolNotImported(_:scope:importers:)``: the scope without
    /// an entry, then the objects that do import the symbol and the scope that would catch
    /// their calls, or that none does and where the calls may be instead.
    static func notImportedMessage(_ symbol: String, scope: ImportScope?, importers: [String]?) -> String {
        let entry = "(it has no JUMP_SLOT or GLOB_DAT entry for it)"
        let head: String =
            switch scope {
            case nil: "no object in scope imports \(quoted(symbol)) \(entry)"
            case .mainProgram: "the main program does not import \(quoted(symbol)) \(entry)"
            case .object(let name): "no object matching \(quoted(name)) imports \(quoted(symbol)) \(entry)"
            case .all, .allIncludingLaterLoads: "no loaded object imports \(quoted(symbol)) \(entry)"
            }
        guard let importers else { return head }
        guard !importers.isEmpty else {
            let none = scope == .all || scope == .allIncludingLaterLoads ? "" : "; no loaded object imports it"
            return head + none
                + ": its calls, if any, are made inside the object that defines it, or through pointers (from dlsym,"
                + " or taken before the hook), which no import table sees"
        }
        // Swift's overlays first: Swift code reaches C functions such as open and fcntl
        // through their wrappers, and so through their import tables.
        let overlays = importers.filter(isSwiftOverlay)
        let ordered = overlays + importers.filter { !isSwiftOverlay($0) }
        var names = ordered.prefix(namedImporterLimit).map { name in
            isSwiftOverlay(name) ? "\(name) (a Swift overlay, through which Swift code calls it)" : name
        }
        if ordered.count > namedImporterLimit { names.append("\(ordered.count - namedImporterLimit) more") }
        let list =
            names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " and " + names.last!
        let advice: String
        let includesMain = importers.contains(mainProgramImporter)
        if importers.count == 1 {
            advice = includesMain ? "hook it in .mainProgram" : "hook it in .object(\(quoted(importers[0])))"
        } else if let overlay = overlays.first {
            advice = "hook it in .object(\(quoted(overlay))) for Swift code's calls, or in .all for every object's"
        } else {
            advice = "hook it in .all, or in \(includesMain ? ".mainProgram or " : "").object(_:) with one of them"
        }
        return head + "; it is imported by " + list + ": " + advice
    }

    /// Whether `name` is the file of one of Swift's platform overlays (`libswiftGlibc.so`).
    private static func isSwiftOverlay(_ name: String) -> Bool {
        // (By prefix, without String.contains(_: String): that comes from the string-processing
        // module, which a library linking this one then has to load.)
        ["Glibc", "Musl", "Android", "WASILibc"].contains { name.hasPrefix("libswift" + $0) }
    }
}
