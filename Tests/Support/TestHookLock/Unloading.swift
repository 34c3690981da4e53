#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Whether the object at `path` is unloaded within five seconds (probed with `RTLD_NOLOAD`
/// every millisecond): another test's walk of the loaded objects, which opens each object it
/// lists (tests run in parallel, in both test targets), may hold it for a moment after its last
/// `dlclose`; one the loader marked never to be unloaded stays however long this waits.
public func isUnloadedSoon(_ path: String) -> Bool {
    for _ in 0..<5000 {
        guard let handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD) else { return true }
        dlclose(handle)
        usleep(1000)
    }
    return false
}
