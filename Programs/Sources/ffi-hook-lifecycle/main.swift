// The lifecycle example: an Objective-C application sends its delegate lifecycle messages,
// and components registered with an ObjCLifecycleDispatcher receive them too, before or
// after the delegate by priority, without the delegate knowing about them (the approach of
// HoloLifecycle, on GNUstep). `swift run ffi-hook-lifecycle` from Programs/.
import CLifecycleApp
import FFIHookObjC

func object(_ pointer: UnsafeMutableRawPointer?) -> ObjCObject {
    guard let pointer else { fatalError("the example's Objective-C library made no object") }
    return ObjCObject(pointer)
}

let application = la_application_new()
let delegate = la_delegate_new()
let analytics = la_component_new("analytics")
let push = la_component_new("push")

do {
    // The protocol's optional methods are invisible to the GNU runtime: list them.
    let dispatcher = try ObjCLifecycleDispatcher(
        delegate: nil, protocol: "LAApplicationDelegate",
        optionalSelectors: [
            "applicationDidBecomeActive:", "application:openURL:", "applicationWillTerminate:",
        ])
    // Catch the delegate where the application is given it.
    let following = try dispatcher.follow(setter: "setDelegate:", of: object(application))
    // Analytics hears everything first; push hears what it implements, after the delegate.
    let analyticsToken = try dispatcher.register(object(analytics), priority: 10)
    let pushToken = try dispatcher.register(object(push), priority: -10)
    print("push skips: \(pushToken.skippedFields.joined(separator: ", "))")

    la_application_set_delegate(application, delegate)
    print("run 1: the delegate and both components")
    la_application_run(application)

    analyticsToken.remove()
    print("run 2: analytics unregistered")
    la_application_run(application)

    pushToken.remove()
    following.remove()
    print("run 3: no component")
    la_application_run(application)
} catch {
    print("ffi-hook-lifecycle: \(error)")
}

for item in [application, delegate, analytics, push] { la_release(item) }
