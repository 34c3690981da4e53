#ifndef CLIFECYCLEAPP_H
#define CLIFECYCLEAPP_H

// A small Objective-C application for the lifecycle example (ffi-hook-lifecycle): an
// application object that sends its delegate the lifecycle messages of the protocol
// LAApplicationDelegate, a delegate, and components that want those messages too. Objects
// are handed to Swift as untyped pointers.

/// A new application object.
void *la_application_new(void);

/// A new delegate (LAAppDelegate).
void *la_delegate_new(void);

/// A new component called `name`: "analytics" implements every lifecycle method,
/// "push" only the launch and termination ones.
void *la_component_new(const char *name);

/// `[application setDelegate:delegate]`.
void la_application_set_delegate(void *application, void *delegate);

/// Runs the application: launches, becomes active, receives a URL, terminates, each a
/// message to its delegate.
void la_application_run(void *application);

/// Releases an object.
void la_release(void *object);

#endif
