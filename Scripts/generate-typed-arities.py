#!/usr/bin/env python3
"""Writes Sources/FFIHook/Hook+TypedArities.swift: the typed before and after hooks for two to
six CEncodable arguments, spelled with one generic parameter per argument.

The typed hooks take their argument types as a parameter pack. Swift specializes a closure
over a pack only partly: every call then finds each argument's place through the pack's tuple
metadata and reads it through its protocol witness, which made a typed block on
`int(int, int)` cost half as much again as an `Invocation` block. For these forms, which the
compiler prefers over the pack forms whenever both apply, the block and its reads are
compiled for the concrete types in the caller's module. One argument keeps the pack forms:
a form of one generic parameter would have the same argument labels as the pack form, so
the two could not be told apart in documentation links, and a pack of one costs little.

    Scripts/generate-typed-arities.py          # rewrites the file
    Scripts/generate-typed-arities.py --check  # exits 1 when the file is out of date
"""

import pathlib
import subprocess
import sys

MIN_ARITY = 2
MAX_ARITY = 6
WORDS = ["", "one argument", "two arguments", "three arguments", "four arguments", "five arguments",
         "six arguments"]
OUTPUT = pathlib.Path(__file__).resolve().parent.parent / "Sources/FFIHook/Hook+TypedArities.swift"


def generics(n, extra=""):
    names = [f"A{i}: CEncodable" for i in range(n)]
    if extra:
        names.append(extra)
    return "<" + ", ".join(names) + ">"


def type_parameters(n):
    first = "arguments a0: A0.Type"
    rest = [f"_ a{i}: A{i}.Type" for i in range(1, n)]
    return ", ".join([first] + rest)


def values(n):
    return ", ".join(f"a{i}" for i in range(n))


def types(n):
    return ", ".join(f"A{i}" for i in range(n))


def reads(n):
    return ", ".join(f"reader.next(A{i}.self)" for i in range(n))


def typed_blocks(n):
    return f"""
    /// A block that reads {WORDS[n]} (a before block, or an after block of a void function).
    @inlinable
    static func fixedReading{generics(n)}(
        {", ".join(f"_ a{i}: A{i}.Type" for i in range(n))}, block: @escaping @Sendable ({types(n)}) -> Void
    ) -> TypedHookBlock {{
        TypedHookBlock(
            block: {{ call in
                var reader = ArgumentCursor(call.argumentList)
                block({reads(n)})
            }},
            direct: TypedDirect(reading: TypedReading{n}(block), arity: {n}))
    }}

    /// An after block that gets the result and {WORDS[n]} and returns the result.
    @inlinable
    static func fixedAfter{generics(n, "Result: CEncodable")}(
        {", ".join(f"_ a{i}: A{i}.Type" for i in range(n))},
        block: @escaping @Sendable (Result, {types(n)}) -> Result
    ) -> TypedHookBlock {{
        TypedHookBlock(
            block: {{ call in
                var reader = ArgumentCursor(call.argumentList)
                let result = block(ReturnCursor.load(Result.self, from: call.returnBuffer), {reads(n)})
                ReturnCursor.store(result, call)
            }},
            direct: TypedDirect(
                result: TypedHolder(block), arity: {n}, resultSize: MemoryLayout<Result>.size))
    }}
"""


def typed_holder(n):
    return f"""
/// A typed block of {WORDS[n]} held as the C call path calls it (see ``TypedDirect``): as
/// ``TypedHolder`` holds an after block, but with its empty result returned directly (held as a
/// `Block`, the closure would pass through a thunk that returns it indirectly).
@usableFromInline
struct TypedReading{n}<{types(n)}>: Sendable {{
    @usableFromInline let block: @Sendable ({types(n)}) -> Void
    @inlinable init(_ block: @escaping @Sendable ({types(n)}) -> Void) {{ self.block = block }}
}}
"""


def public_forms(n, target):
    """The four forms for one arity; `target` is "slot" (Hook) or "symbol" (ImportTable)."""
    if target == "slot":
        head = "on slot: FunctionSlot"
        token = "HookToken"
        where_before = "before the original"
        where_after = "after the original"

        def body(encoding, position, block):
            return f"""        let signature = try derivedSignature({encoding}, {values(n)})
        return try install(
            on: slot, signature: signature, position: .{position}, options: options,
            typed: TypedBlock.{block}({values(n)}, block: block))"""
    else:
        head = "symbol: String, in scope: ImportScope"
        token = "HookGroupToken"
        where_before = "before `symbol`"
        where_after = "after `symbol`"

        def body(encoding, position, block):
            return f"""        try hook(
            symbol: symbol, in: scope, signature: Hook.derivedSignature({encoding}, {values(n)}),
            position: .{position}, options: options, TypedBlock.{block}({values(n)}, block: block).block)"""

    return f"""
    /// Runs `block` with {WORDS[n]} {where_before}.
    @inlinable
    public static func before{generics(n, "Result: CEncodable")}(
        {head}, {type_parameters(n)}, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable ({types(n)}) -> Void
    ) throws(HookError) -> {token} {{
{body("Result.typeEncoding", "before", "fixedReading")}
    }}

    /// Runs `block` with {WORDS[n]} {where_before}, for a function returning void.
    @inlinable
    public static func before{generics(n)}(
        {head}, {type_parameters(n)},
        options: HookOptions = [], _ block: @escaping @Sendable ({types(n)}) -> Void
    ) throws(HookError) -> {token} {{
{body('"v"', "before", "fixedReading")}
    }}

    /// Runs `block` {where_after} with its result and {WORDS[n]}; what the block returns is
    /// what the caller receives.
    @inlinable
    public static func after{generics(n, "Result: CEncodable")}(
        {head}, {type_parameters(n)}, returning: Result.Type,
        options: HookOptions = [], _ block: @escaping @Sendable (Result, {types(n)}) -> Result
    ) throws(HookError) -> {token} {{
{body("Result.typeEncoding", "after", "fixedAfter")}
    }}

    /// Runs `block` {where_after} with {WORDS[n]}, for a function returning void.
    @inlinable
    public static func after{generics(n)}(
        {head}, {type_parameters(n)},
        options: HookOptions = [], _ block: @escaping @Sendable ({types(n)}) -> Void
    ) throws(HookError) -> {token} {{
{body('"v"', "after", "fixedReading")}
    }}
"""


def source():
    parts = [
        "// Generated by Scripts/generate-typed-arities.py; edit the script, not this file.\n",
        """
/// Typed before and after hooks for two to six ``CEncodable`` arguments, one generic
/// parameter per argument. They behave as the forms that take the argument types as a
/// parameter pack, which the compiler passes over for these whenever both apply: a block
/// given here reads its arguments through code compiled for their types, where the pack
/// forms find each one through the pack's metadata on every call.
extension Hook {""",
    ]
    for n in range(MIN_ARITY, MAX_ARITY + 1):
        parts.append(f"\n    // MARK: - {WORDS[n].capitalize()}\n")
        parts.append(public_forms(n, "slot"))
    parts.append("}\n\n/// The import-table forms of the fixed-arity typed hooks (see ``Hook``).\nextension ImportTable {")
    for n in range(MIN_ARITY, MAX_ARITY + 1):
        parts.append(f"\n    // MARK: - {WORDS[n].capitalize()}\n")
        parts.append(public_forms(n, "symbol"))
    parts.append(
        "}\n\n/// The blocks of the fixed-arity typed hooks: each argument read through its type's\n"
        "/// ``CEncodable/loadUnaligned(from:)`` (through `ArgumentCursor`), compiled for the type\n"
        "/// where the hook is installed.\n"
        "extension TypedBlock {")
    for n in range(MIN_ARITY, MAX_ARITY + 1):
        parts.append(typed_blocks(n))
    parts.append("}\n")
    for n in range(MIN_ARITY, MAX_ARITY + 1):
        parts.append(typed_holder(n))
    text = "".join(parts)
    # No blank line right after an opening brace, one at most anywhere.
    while "{\n\n" in text:
        text = text.replace("{\n\n", "{\n")
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    # The formatter the lint uses lays out the long signatures.
    root = OUTPUT.parent.parent.parent
    formatted = subprocess.run(
        ["swift", "format", "format", "--assume-filename", str(OUTPUT)], input=text, text=True,
        capture_output=True, check=True, cwd=root)
    return formatted.stdout


def main():
    text = source()
    if sys.argv[1:] == ["--check"]:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.name} is out of date: run Scripts/generate-typed-arities.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
