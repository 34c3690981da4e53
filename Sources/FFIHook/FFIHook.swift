// The facade re-exports the core so that `import FFIHook` gives the whole library.
@_exported public import FFIHookCore
