import HookFixtures

/// The rows of whole batches of inline hooks: a thousand functions hooked and unhooked while
/// threads call them, and a real library planned and patched as one batch and one function at
/// a time.
extension Report {
    /// A batch of ``InlineBatchRun``'s thousand functions: planning it, and installing a no-op
    /// before hook on all of them and removing it, while threads call them all.
    struct InlineBatchCost: Codable, Sendable {
        /// How many functions the batch holds.
        var functions: Int
        /// Planning the batch (decoding, relocating, writing the trampolines).
        var planNanoseconds: Double
        /// Installing the hook on every function: one stop writes every patch.
        var install: Distribution
        /// Removing the group: one stop takes every patch out.
        var remove: Distribution
        /// How many threads called the functions meanwhile.
        var callerThreads: Int
        /// The calls they made, every one of which returned the right sum.
        var callerCalls: Int64
        /// Stops of the threads per install-and-remove pair (2: one each).
        var stopsPerInstallAndRemove: Double
    }

    /// ``LibraryRun``'s library, each way in a process of its own.
    struct LibraryCost: Codable, Sendable {
        /// The library's soname.
        var library: String
        var batch: Batch
        var oneByOne: OneByOne

        /// Every exported function as one batch.
        struct Batch: Codable, Sendable {
            var functions: Int
            /// Functions refused by reason.
            var refused: [String: Int]
            /// Planned functions whose patch could not be written.
            var notPatched: Int
            var planMilliseconds: Double
            var patchMilliseconds: Double
            var unpatchMilliseconds: Double
            /// Resident memory added by planning, and by planning and patching (KiB), the
            /// library's code resident beforehand.
            var residentKiBAfterPlan: Int
            var residentKiBAfterPatch: Int
            /// Anonymous memory added by planning and patching (KiB): it counts the pages of the
            /// library's code that the patches turned into private copies.
            var privateKiBAfterPatch: Int
            /// Anonymous memory added by planning (KiB): what the plan holds (its heap, the
            /// slab's code and cells, the plans' tables). The rest of the resident memory it
            /// adds is file pages of the program's own libraries that planning a whole library
            /// reads for the first time (the decoder's tables, code of the Swift libraries:
            /// 500 KiB or so, shared and clean, the same for any library), not the plan's.
            var anonymousKiBAfterPlan: Int
            /// What the plan holds (``anonymousKiBAfterPlan``), per function planned.
            var bytesPerFunctionPlanned: Double
            /// Mappings added by planning and patching.
            var mappingsAdded: Int

            /// Planning and patching.
            var totalMilliseconds: Double { planMilliseconds + patchMilliseconds }
        }

        /// Every exported function planned and patched alone, one after the other.
        struct OneByOne: Codable, Sendable {
            var functions: Int
            var refused: Int
            var totalMilliseconds: Double
            /// The mean time to plan and patch one function, of the first hundred and the last.
            var firstHundredMicroseconds: Double
            var lastHundredMicroseconds: Double

            var lastOverFirst: Double { lastHundredMicroseconds / firstHundredMicroseconds }
        }
    }

    /// The lines that say what the batch rows measured.
    var batchLines: [String] {
        var lines: [String] = []
        if let batch = inlineBatch {
            func figure(_ values: Distribution) -> String {
                "median \(Format.microseconds(values.median)) µs, p99 \(Format.microseconds(values.p99)) µs"
            }
            lines.append(
                "a batch of \(batch.functions) inline functions, with \(batch.callerThreads) threads calling all of "
                    + "them: planned in \(Format.microseconds(batch.planNanoseconds)) µs; a no-op before hook "
                    + "installed on every one: \(figure(batch.install)); removed: \(figure(batch.remove)) "
                    + "(\(batch.install.samples) pairs, \(Format.fixed(batch.stopsPerInstallAndRemove, 1)) stops of the "
                    + "threads a pair; the callers made \(Format.fixed(Double(batch.callerCalls), 0)) calls, every one "
                    + "with the right sum)")
        }
        if let library {
            let batch = library.batch
            let refused =
                batch.refused.isEmpty
                ? "none refused"
                : batch.refused.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                    + " refused"
            lines.append(
                "\(library.library) as one batch: \(batch.functions) functions planned (\(refused)) in "
                    + "\(Format.fixed(batch.planMilliseconds, 1)) ms, patched in "
                    + "\(Format.fixed(batch.patchMilliseconds, 1)) ms (\(batch.notPatched) not patched), unpatched in "
                    + "\(Format.fixed(batch.unpatchMilliseconds, 1)) ms; memory the plan holds "
                    + "+\(batch.anonymousKiBAfterPlan) KiB (\(Format.fixed(batch.bytesPerFunctionPlanned, 0)) bytes a "
                    + "function; resident memory +\(batch.residentKiBAfterPlan) KiB planned, the rest the program's "
                    + "own libraries' pages read for the first time), "
                    + "+\(batch.residentKiBAfterPatch) KiB patched (private copies of code pages included: "
                    + "+\(batch.privateKiBAfterPatch) KiB anonymous); \(batch.mappingsAdded) mappings added")
            let single = library.oneByOne
            lines.append(
                "\(library.library) one function at a time (InlineFunction(address:), patch()): \(single.functions) "
                    + "functions (\(single.refused) refused) in \(Format.fixed(single.totalMilliseconds, 0)) ms; the "
                    + "first hundred \(Format.fixed(single.firstHundredMicroseconds, 1)) µs each, the last hundred "
                    + "\(Format.fixed(single.lastHundredMicroseconds, 1)) µs each (\(Format.ratio(single.lastOverFirst)))"
            )
        }
        return lines
    }

    /// The batch rows' goals.
    var batchTargets: [TargetCheck] {
        var targets: [TargetCheck] = []
        if let batch = inlineBatch {
            let pair = batch.install.median + batch.remove.median
            targets.append(
                TargetCheck(
                    goal: "a batch of \(batch.functions) inline functions installed and removed < 100 ms with "
                        + "\(batch.callerThreads) threads calling them",
                    measured: "\(Format.fixed(pair / 1e6, 2)) ms", met: pair < 100_000_000))
        }
        if let library {
            let batch = library.batch
            targets.append(
                TargetCheck(
                    goal: "every function of \(library.library) planned and patched as one batch ≤ 200 ms",
                    measured: "\(Format.fixed(batch.totalMilliseconds, 1)) ms for \(batch.functions) functions",
                    met: batch.totalMilliseconds <= 200))
            // The goal is 1 MiB for a library of 5,000 functions: 210 bytes a function, of memory
            // the plan holds (anonymous: see ``LibraryCost/Batch/anonymousKiBAfterPlan``).
            let perFiveThousand = batch.bytesPerFunctionPlanned * 5_000 / 1_048_576
            targets.append(
                TargetCheck(
                    goal: "≤ 1 MiB of memory held per 5,000 functions planned as one batch (\(library.library))",
                    measured:
                        "\(Format.fixed(perFiveThousand, 2)) MiB per 5,000 (\(batch.anonymousKiBAfterPlan) KiB for "
                        + "\(batch.functions), \(Format.fixed(batch.bytesPerFunctionPlanned, 0)) bytes a function)",
                    met: perFiveThousand <= 1))
            targets.append(
                TargetCheck(
                    goal: "planning and patching one function at a time stays linear: the last hundred ≤ 1.5 × the "
                        + "first",
                    measured: Format.ratio(library.oneByOne.lastOverFirst), met: library.oneByOne.lastOverFirst <= 1.5))
        }
        return targets
    }
}
