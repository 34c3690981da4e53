/// Typed blocks for methods, whose first two arguments are the receiver and the selector:
/// the block gets the receiver first, then the arguments from the third on. For modules built
/// on the engine (Objective-C methods); types were checked at install time. `Receiver` is
/// the word-sized type the block gets the receiver as (an object handle of the module's).
package enum MethodBlock {
    /// A block that reads the receiver and the arguments.
    package static func reading<Receiver: BitwiseCopyable, each Argument: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type,
        block: @escaping @Sendable (Receiver, repeat each Argument) -> Void
    ) -> @Sendable (borrowing Invocation) -> Void {
        precondition(MemoryLayout<Receiver>.size == MemoryLayout<UnsafeRawPointer>.size, "a receiver is one word")
        return { call in
            var reader = ArgumentCursor(call.argumentList)
            let receiver = reader.next(Receiver.self)
            reader.index = 2
            block(receiver, repeat reader.next((each Argument).self))
        }
    }

    /// An after block that gets the receiver, the result and the arguments, and returns the
    /// result.
    package static func after<Receiver: BitwiseCopyable, each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type,
        block: @escaping @Sendable (Receiver, Result, repeat each Argument) -> Result
    ) -> @Sendable (borrowing Invocation) -> Void {
        precondition(MemoryLayout<Receiver>.size == MemoryLayout<UnsafeRawPointer>.size, "a receiver is one word")
        return { call in
            var reader = ArgumentCursor(call.argumentList)
            let receiver = reader.next(Receiver.self)
            reader.index = 2
            let result = block(
                receiver, ReturnCursor.load(Result.self, from: call.returnBuffer),
                repeat reader.next((each Argument).self))
            ReturnCursor.store(result, call)
        }
    }

    /// An instead block that gets the original as a Swift closure (taking the arguments from
    /// the third on; the receiver and selector stay), the receiver and the arguments.
    package static func instead<Receiver: BitwiseCopyable, each Argument: BitwiseCopyable, Result: BitwiseCopyable>(
        _ arguments: repeat (each Argument).Type,
        block: @escaping @Sendable ((repeat each Argument) -> Result, Receiver, repeat each Argument) -> Result
    ) -> @Sendable (borrowing Invocation) -> Void {
        precondition(MemoryLayout<Receiver>.size == MemoryLayout<UnsafeRawPointer>.size, "a receiver is one word")
        return { call in
            var reader = ArgumentCursor(call.argumentList)
            let receiver = reader.next(Receiver.self)
            reader.index = 2
            let values = (repeat reader.next((each Argument).self))
            let list = call.argumentList
            let returnBuffer = call.returnBuffer
            let continuation = call.continuation
            let result = block(
                { (replacements: repeat each Argument) -> Result in
                    var writer = ArgumentCursor(list)
                    writer.index = 2
                    repeat writer.write(each replacements)
                    continuation.callOriginal()
                    return ReturnCursor.load(Result.self, from: returnBuffer)
                }, receiver, repeat each values)
            ReturnCursor.store(result, call)
        }
    }
}
