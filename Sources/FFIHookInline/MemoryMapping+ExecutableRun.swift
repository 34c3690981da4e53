internal import FFIHook

extension MemoryMapping {
    /// How many bytes of readable, executable memory run without a gap from `address`: to the
    /// end of the mapping holding it, and on through each next mapping that starts where the
    /// last one ends and is readable and executable too. 0 when `address` is not in such a
    /// mapping.
    ///
    /// One object's code is often several lines of `/proc/self/maps`: a page whose protection
    /// changed (to write a patch, say) becomes a mapping of its own and stays one, so the end
    /// of the mapping holding a function says nothing about where its code ends. `mappings`
    /// is in address order, as ``MemoryMapping/all()`` gives it.
    static func executableRun(from address: UInt, in mappings: [MemoryMapping]) -> Int {
        // The first mapping that ends after the address (binary search: thousands of lines).
        var low = 0
        var high = mappings.count
        while low < high {
            let middle = (low + high) / 2
            if mappings[middle].end <= address { low = middle + 1 } else { high = middle }
        }
        var end = address
        var index = low
        while index < mappings.count, mappings[index].start <= end, mappings[index].readable,
            mappings[index].executable
        {
            end = max(end, mappings[index].end)
            index += 1
        }
        return Int(end - address)
    }
}
