#ifndef CFFI_H
#define CFFI_H

#include <ffi.h>

// MARK: - Built-in types
// libffi's ffi_type_* objects are mutable C globals, which Swift 6 refuses to touch.

/// `ffi_type_void`, reachable from Swift 6.
static inline ffi_type *ffh_type_void(void) { return &ffi_type_void; }
/// `ffi_type_uint8`, reachable from Swift 6.
static inline ffi_type *ffh_type_uint8(void) { return &ffi_type_uint8; }
/// `ffi_type_sint8`, reachable from Swift 6.
static inline ffi_type *ffh_type_sint8(void) { return &ffi_type_sint8; }
/// `ffi_type_uint16`, reachable from Swift 6.
static inline ffi_type *ffh_type_uint16(void) { return &ffi_type_uint16; }
/// `ffi_type_sint16`, reachable from Swift 6.
static inline ffi_type *ffh_type_sint16(void) { return &ffi_type_sint16; }
/// `ffi_type_uint32`, reachable from Swift 6.
static inline ffi_type *ffh_type_uint32(void) { return &ffi_type_uint32; }
/// `ffi_type_sint32`, reachable from Swift 6.
static inline ffi_type *ffh_type_sint32(void) { return &ffi_type_sint32; }
/// `ffi_type_uint64`, reachable from Swift 6.
static inline ffi_type *ffh_type_uint64(void) { return &ffi_type_uint64; }
/// `ffi_type_sint64`, reachable from Swift 6.
static inline ffi_type *ffh_type_sint64(void) { return &ffi_type_sint64; }
/// `ffi_type_float`, reachable from Swift 6.
static inline ffi_type *ffh_type_float(void) { return &ffi_type_float; }
/// A float of its own, not `ffi_type_float`: libffi's `ffi_prep_cif_var` refuses
/// `&ffi_type_float` among variadic arguments (C promotes a float to double), which is right
/// for a float argument but not for the lone float that ends a structure passed in pieces (the
/// low four bytes of its vector register, where `va_arg` of the structure reads them).
static inline ffi_type *ffh_type_float_piece(void) {
    static ffi_type piece = {.size = 4, .alignment = 4, .type = FFI_TYPE_FLOAT, .elements = 0};
    return &piece;
}
/// `ffi_type_double`, reachable from Swift 6.
static inline ffi_type *ffh_type_double(void) { return &ffi_type_double; }
/// `ffi_type_longdouble`, reachable from Swift 6.
static inline ffi_type *ffh_type_longdouble(void) { return &ffi_type_longdouble; }
/// `ffi_type_pointer`, reachable from Swift 6.
static inline ffi_type *ffh_type_pointer(void) { return &ffi_type_pointer; }

#ifdef FFI_TARGET_HAS_COMPLEX_TYPE
/// `ffi_type_complex_float`, or NULL where libffi has no complex types.
static inline ffi_type *ffh_type_complex_float(void) { return &ffi_type_complex_float; }
/// `ffi_type_complex_double`, or NULL where libffi has no complex types.
static inline ffi_type *ffh_type_complex_double(void) { return &ffi_type_complex_double; }
/// `ffi_type_complex_longdouble`, or NULL where libffi has no complex types.
static inline ffi_type *ffh_type_complex_longdouble(void) { return &ffi_type_complex_longdouble; }
#else
static inline ffi_type *ffh_type_complex_float(void) { return (ffi_type *)0; }
static inline ffi_type *ffh_type_complex_double(void) { return (ffi_type *)0; }
static inline ffi_type *ffh_type_complex_longdouble(void) { return (ffi_type *)0; }
#endif

// MARK: - Macros and sizes

/// `FFI_DEFAULT_ABI` is a macro whose value Swift cannot import as a typed constant.
static inline ffi_abi ffh_default_abi(void) { return FFI_DEFAULT_ABI; }
/// `FFI_TYPE_STRUCT`, a macro, as a value of the `ffi_type.type` field's type.
static inline unsigned short ffh_type_code_struct(void) { return FFI_TYPE_STRUCT; }
/// `sizeof(ffi_closure)`, which Swift cannot compute for a struct with a trampoline array member.
static inline size_t ffh_closure_size(void) { return sizeof(ffi_closure); }
/// `FFI_TRAMPOLINE_SIZE`: the bytes of a closure's trampoline, at its start.
static inline size_t ffh_trampoline_size(void) { return FFI_TRAMPOLINE_SIZE; }
/// `sizeof(ffi_arg)`: libffi widens integer return values narrower than this to it.
static inline size_t ffh_arg_size(void) { return sizeof(ffi_arg); }

#endif
