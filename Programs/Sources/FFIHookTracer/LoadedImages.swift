internal import CTracerSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One loaded object as the tracer sees it: its names and, when asked for, the functions it
/// exports and the symbols of its import-table entries.
struct LoadedImage: Sendable {
    /// What a walk reports of an object beyond its names.
    struct Details: OptionSet, Sendable {
        let rawValue: Int32
        /// Its exported functions.
        static let exports = Details(rawValue: Int32(FHT_WANTS_EXPORTS))
        /// The symbols of its import-table entries.
        static let imports = Details(rawValue: Int32(FHT_WANTS_IMPORTS))
    }

    /// The path the loader knows it by; empty for the main program.
    let path: String
    /// Its load bias, which tells it from an object loaded later at the same path.
    let base: UInt
    /// What identifies it across walks: its path and load bias.
    let key: String
    /// Its DT_SONAME.
    var soname: String?
    /// Its DT_NEEDED names.
    var needed: [String] = []
    /// Its exported functions, when asked for.
    var exports: [String] = []
    /// The symbols its import-table entries are for, when asked for: each once.
    var imports: [String] = []
    /// Whether it is the main program (the loader lists it first).
    var isMainProgram = false
    /// Whether the walk took it as an earlier walk saw it (``current(details:keeps:known:)``'s
    /// `known`): no details were asked of it.
    var isKnown = false

    init(path: String, base: UInt) {
        self.path = path
        self.base = base
        key = "\(path)@\(base)"
    }

    /// Its soname or file name, for messages.
    var name: String {
        if isMainProgram { return "the main program" }
        return soname ?? path.lastPathComponent
    }

    /// The loaded objects now, in the loader's order, each with the details `details` asks
    /// for once its names are known; of the exports and imports, those `keeps` says yes to (a
    /// string is made of those alone: a library exports thousands of names). An object of
    /// `known` (by load bias: one an earlier walk saw, its names read then) loaded at the same
    /// address under the same path is taken as it is, with no string made and no detail asked:
    /// a walk at every `dlopen` and `dlclose` of a program that loads hundreds of objects
    /// otherwise read them all again each time.
    static func current(
        details: (LoadedImage) -> Details, keeps: @escaping (UnsafePointer<CChar>) -> Bool = { _ in true },
        known: [UInt: LoadedImage] = [:]
    ) -> [LoadedImage] {
        // The object being reported is built apart from those done (not through the list's last
        // element), and the walk's thread alone touches the collector: a library's thousands of
        // names each pay for their string and nothing else.
        final class Collector {
            @exclusivity(unchecked) var images: [LoadedImage] = []
            @exclusivity(unchecked) var current: LoadedImage?
            let details: (LoadedImage) -> Details
            let keeps: (UnsafePointer<CChar>) -> Bool
            let known: [UInt: LoadedImage]
            init(
                _ details: @escaping (LoadedImage) -> Details, _ keeps: @escaping (UnsafePointer<CChar>) -> Bool,
                _ known: [UInt: LoadedImage]
            ) {
                self.details = details
                self.keeps = keeps
                self.known = known
            }

            func finish() {
                if let current { images.append(current) }
                current = nil
            }
        }
        return withoutActuallyEscaping(details) { details in
            let collector = Collector(details, keeps, known)
            withExtendedLifetime(collector) {
                fht_walk(
                    { context, item, text, base in
                        let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                        if item == FHT_OBJECT {
                            let isMainProgram = collector.images.isEmpty && collector.current == nil
                            collector.finish()
                            if let image = collector.known[base], image.isMainProgram == isMainProgram,
                                image.path.withCString({ strcmp($0, text) == 0 })
                            {
                                var known = image
                                known.isKnown = true
                                collector.images.append(known)
                                return Int32(FHT_KNOWN_OBJECT)
                            }
                            collector.current = LoadedImage(path: String(cString: text), base: base)
                            collector.current?.isMainProgram = isMainProgram
                            return 0
                        }
                        switch item {
                        case FHT_SONAME: collector.current?.soname = String(cString: text)
                        case FHT_NEEDED: collector.current?.needed.append(String(cString: text))
                        case FHT_NAMED: return collector.current.map { collector.details($0).rawValue } ?? 0
                        case FHT_EXPORT where collector.keeps(text):
                            collector.current?.exports.append(String(cString: text))
                        case FHT_IMPORT where collector.keeps(text):
                            collector.current?.imports.append(String(cString: text))
                        default: break
                        }
                        return 0
                    }, Unmanaged.passUnretained(collector).toOpaque())
            }
            collector.finish()
            return collector.images
        }
    }

    /// The objects of `images` that the program brought: those reachable through DT_NEEDED
    /// from the main program and from every object nothing needs (other preloaded objects,
    /// the vDSO), except from the objects of `tracer` (this library and the start library, which
    /// only the tracer brought).
    static func broughtByProgram(_ images: [LoadedImage], tracer: Set<String>) -> Set<String> {
        var byName: [String: Int] = [:]
        for (index, image) in images.enumerated() {
            if let soname = image.soname { byName[soname] = index }
            let fileName = image.path.lastPathComponent
            if !fileName.isEmpty, byName[fileName] == nil {
                byName[fileName] = index
            }
        }
        let neededByOthers = Set(images.flatMap(\.needed).compactMap { byName[$0] })
        var queue = images.indices.filter { index in
            images[index].isMainProgram || (!neededByOthers.contains(index) && !tracer.contains(images[index].path))
        }
        var reached = Set(queue)
        while let index = queue.popLast() {
            for name in images[index].needed {
                if let next = byName[name], reached.insert(next).inserted { queue.append(next) }
            }
        }
        return Set(reached.map { images[$0].key })
    }
}

extension String {
    /// The path's last component (after its last `/`, trailing slashes left out), or the whole
    /// string when it has none: what `split(separator: "/").last` gives, found in the UTF-8
    /// bytes rather than character by character (it runs for every loaded object as the tracer
    /// starts, where the character walk cost several thousand instructions a path).
    var lastPathComponent: String {
        let bytes = utf8
        let slash = UInt8(ascii: "/")
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
        guard end > bytes.startIndex else { return self }
        let start = bytes[..<end].lastIndex(of: slash).map { bytes.index(after: $0) } ?? bytes.startIndex
        return String(self[start..<end])
    }
}
