// Re-exports the hook engine (and with it the core), whose tokens, invocations, options and
// signatures this module's entry points take and return: `import FFIHookObjC` is enough.
@_exported public import FFIHook
