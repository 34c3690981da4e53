import Testing

@testable import FFIHook

/// Which loaded objects a walk for a scope pins.
@Suite struct ImportScopeTests {
    /// Before pinning, a walk for a scope leaves out only objects the scope cannot hold: for
    /// every loaded object, a scope naming it by path, soname, file name or the end of its
    /// path, the main program's and all objects', every object in the scope passes; a path
    /// names no object of another path.
    @Test func theObjectsLeftOutBeforePinningAreNeverInTheScope() {
        ImportWalk.withLoadedObjects { objects in
            for object in objects {
                var scopes: [ImportScope] = [.all, .mainProgram, .object(object.path)]
                if let soname = object.soname { scopes.append(.object(soname)) }
                let components = object.path.split(separator: "/")
                if let file = components.last { scopes.append(.object(String(file))) }
                if components.count >= 2 { scopes.append(.object(components.suffix(2).joined(separator: "/"))) }
                for scope in scopes {
                    for other in objects where ImportWalk.isInScope(other, scope) {
                        #expect(ImportWalk.mayBeInScope(path: other.path, scope), "\(other.path) in \(scope)")
                    }
                }
                guard object.path.hasPrefix("/") else { continue }
                for other in objects where other.path != object.path && !other.path.hasSuffix(object.path) {
                    #expect(!ImportWalk.mayBeInScope(path: other.path, .object(object.path)), "\(other.path)")
                }
            }
            #expect(objects.count > 3)
        }
    }
}
