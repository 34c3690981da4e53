import FFIHook
import FFIHookObjC
import Synchronization
import Testing

/// The Objective-C lifecycle dispatcher, on a GNUstep delegate and components built by gcc.
/// Part of the serialized suite: the fixture keeps one log of lifecycle calls.
extension ObjCMethodHookTests {
    /// Components get the message with its arguments, by priority, before or after the
    /// delegate's own method; unregistered ones no longer do.
    @Test func lifecycleMessagesReachComponentsByPriority() throws {
        _ = try F.class("OFXAppDelegate")
        let delegate = F.new("OFXAppDelegate")
        let components = ["A", "C", "B"].map { F.newComponent(CChar(UInt8(ascii: Unicode.Scalar($0)!))) }
        defer { for object in [delegate] + components { F.release(object) } }
        try {
            let dispatcher = try ObjCLifecycleDispatcher(
                delegate: F.object(delegate), protocol: "OFXLifecycle", optionalSelectors: ["willTerminate"])
            #expect(dispatcher.selectors == ["didLaunch:", "willTerminate"])
            let first = try dispatcher.register(F.object(components[0]), priority: 10)
            let second = try dispatcher.register(F.object(components[1]))
            let last = try dispatcher.register(F.object(components[2]), priority: -5)
            #expect(first.skippedFields == ["willTerminate"])
            F.resetEvents()
            F.didLaunch(delegate, 7)
            #expect(F.events() == "ACDB")
            #expect(F.lastCode(components[2]) == 7)
            F.willTerminate(delegate)
            #expect(F.events() == "ACDBd")
            #expect(first.remove())
            #expect(!first.remove())
            F.resetEvents()
            F.didLaunch(delegate, 8)
            #expect(F.events() == "CDB")
            second.remove()
            last.remove()
            F.resetEvents()
            F.didLaunch(delegate, 9)
            #expect(F.events() == "D")
            // The dispatcher watches its delegate's deallocation while it lives.
            #expect(F.dispatchClass(delegate) == "FFIHook_OFXAppDelegate")
            #expect(F.reportedClass(delegate) == "OFXAppDelegate")
        }()
        // Gone with its tokens, the dispatcher no longer watches: the delegate's class is back.
        #expect(F.dispatchClass(delegate) == "OFXAppDelegate")
        #expect(F.launches(components[0]) == 1)
    }

    /// A component whose method has other types is refused; the delegate's setter moves the
    /// dispatcher to the new delegate.
    @Test func lifecycleDispatcherFollowsTheDelegate() throws {
        _ = try F.class("OFXApp")
        let app = F.new("OFXApp")
        let delegates = [F.new("OFXAppDelegate"), F.new("OFXAppDelegate")]
        let component = F.newComponent(0)
        let odd = F.new("OFXOddComponent")
        defer { for object in [app, component, odd] + delegates { F.release(object) } }
        let dispatcher = ObjCLifecycleDispatcher(delegate: nil, selectors: ["didLaunch:"])
        let following = try dispatcher.follow(setter: "setDelegate:", of: F.object(app))
        let registration = try dispatcher.register(F.object(component))
        F.setDelegate(app, delegates[0])
        #expect(dispatcher.delegate == F.object(delegates[0]))
        #expect(throws: ObjCHookError.self) { try dispatcher.register(F.object(odd)) }
        F.didLaunch(delegates[0], 1)
        F.didLaunch(delegates[1], 2)
        #expect(F.launches(component) == 1)
        F.setDelegate(app, delegates[1])
        F.didLaunch(delegates[0], 3)
        F.didLaunch(delegates[1], 4)
        #expect(F.launches(component) == 2)
        #expect(F.lastCode(component) == 4)
        #expect(F.dispatchClass(delegates[0]) == "OFXAppDelegate")
        F.setDelegate(app, nil)
        F.didLaunch(delegates[1], 5)
        #expect(F.launches(component) == 2)
        following.remove()
        registration.remove()
        #expect(F.dispatchClass(app) == "OFXApp")
    }

    /// A delegate that does not implement a covered selector (an optional method it skips):
    /// the others are dispatched. A delegate deallocated while the dispatcher holds it is
    /// forgotten, and later registrations hook nothing.
    @Test func lifecycleDelegatesThatSkipOrGo() throws {
        _ = try F.class("OFXAppDelegate")
        let delegate = F.new("OFXPlain")  // implements identity: only
        let component = F.newComponent(0)
        defer { F.release(component) }
        let dispatcher = ObjCLifecycleDispatcher(delegate: F.object(delegate), selectors: ["didLaunch:", "identity:"])
        let registration = try dispatcher.register(F.object(component))
        #expect(registration.skippedFields == ["identity:"])
        #expect(F.identity(delegate, 3) == 3)
        #expect(F.dispatchClass(delegate) == "FFIHook_OFXPlain")
        #expect(F.object(delegate).reportedClass?.superclass?.name == "NSObject")
        F.release(delegate)
        #expect(dispatcher.delegate == nil)
        let later = try dispatcher.register(F.object(component))
        #expect(later.isActive)
        later.remove()
        registration.remove()
    }

    /// Components registered and unregistered while two threads send the delegate's
    /// messages: a component registered throughout gets every one of them.
    @Test func componentsComeAndGoWhileMessagesAreSent() throws {
        final class Flags: Sendable {
            let done = Atomic<Int>(0)
            let failures = Atomic<Int>(0)
        }
        _ = try F.class("OFXAppDelegate")
        let delegate = F.new("OFXAppDelegate")
        let steady = F.newComponent(0)
        let transient = F.newComponent(0)
        defer { for object in [delegate, steady, transient] { F.release(object) } }
        let dispatcher = ObjCLifecycleDispatcher(delegate: F.object(delegate), selectors: ["didLaunch:"])
        let registration = try dispatcher.register(F.object(steady), priority: -1)
        let flags = Flags()
        let perThread = 100_000
        let delegateObject = F.object(delegate)
        let transientObject = F.object(transient)
        let sender: @Sendable () -> Void = {
            let delegate = OpaquePointer(delegateObject.pointer)
            for code in 0..<perThread { F.didLaunch(delegate, Int32(code)) }
            flags.done.add(1, ordering: .relaxed)
        }
        let senders = 4
        F.runThreads(
            Array(repeating: sender, count: senders) + [
                {
                    while flags.done.load(ordering: .relaxed) < senders {
                        guard let token = try? dispatcher.register(transientObject, priority: 5) else {
                            flags.failures.add(1, ordering: .relaxed)
                            return
                        }
                        token.remove()
                    }
                },
                // Components made, registered, unregistered and released as the
                // documentation says: after waiting for the messages in flight. (The runtime,
                // counting one thread, used to free replaced dispatch tables under the
                // sending threads.)
                {
                    while flags.done.load(ordering: .relaxed) < senders {
                        let component = F.newComponent(0)
                        guard let token = try? dispatcher.register(F.object(component), priority: -3) else {
                            flags.failures.add(1, ordering: .relaxed)
                            return
                        }
                        token.remove()
                        guard (try? Hook.waitForReclamation()) != nil else {
                            flags.failures.add(1, ordering: .relaxed)
                            return
                        }
                        F.release(component)
                    }
                },
            ])
        registration.remove()
        #expect(flags.failures.load(ordering: .relaxed) == 0)
        #expect(F.launches(steady) == Int32(senders * perThread))
    }
}
