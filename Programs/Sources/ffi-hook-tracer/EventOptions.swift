// The options for the outputs built from each call's begin and end, and the environment
// variables they become.

/// Each output option and the variable the library reads it from.
let eventOptions: [(option: String, variable: String)] = [
    ("--chrome-trace", "FFI_HOOK_TRACER_CHROME_TRACE"),
    ("--folded", "FFI_HOOK_TRACER_FOLDED"),
    ("--flamegraph", "FFI_HOOK_TRACER_FLAMEGRAPH"),
    ("--timeline", "FFI_HOOK_TRACER_TIMELINE"),
    ("--events", "FFI_HOOK_TRACER_EVENTS"),
]

/// The usage lines of the output options.
let eventUsage = """
      --chrome-trace FILE
                         write every traced call as Chrome trace event JSON (a begin and an
                         end per call, per thread, in microseconds), for Perfetto
                         (ui.perfetto.dev) or chrome://tracing
      --folded FILE      write folded stacks, "a;b;c NANOSECONDS" lines: the self time of
                         each stack of traced functions, for flamegraph.pl or speedscope
      --flamegraph FILE  write an SVG flame graph of time by call stack, to open in a
                         browser (a frame's tooltip gives its function, time and share)
      --timeline FILE    write an SVG timeline: a lane per thread, a bar per call
      --events N         the events each thread keeps for these files (two per call;
                         default 1000000). Calls made once a thread's buffer is full are
                         left out of the files and counted on standard error. Calls are
                         recorded only when one of the four files is asked for; %p in a
                         file name becomes the process ID
    """

/// The value of the output option `name`, if it is one: nil for another option; exits with
/// the usage when the value is missing or not a number of events.
func eventOption(_ name: String, inline: String?, _ arguments: inout ArraySlice<String>) -> (String, String)? {
    guard let variable = eventOptions.first(where: { $0.option == name })?.variable else { return nil }
    guard let value = inline ?? arguments.popFirst() else { fail("\(name) needs a value") }
    refuseEmpty(value, of: name)
    // The bounds the library takes (TraceEvents.maximumCapacity: 1 << 28).
    if name == "--events", Int(value).map({ $0 < 2 || $0 > 268_435_456 }) ?? true {
        fail("--events takes a number of events from 2 to 268435456")
    }
    return (variable, name == "--events" ? value : absolute(value))
}
