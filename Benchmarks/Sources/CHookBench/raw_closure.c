#include "CHookBench.h"

#include <ffi.h>
#include <stddef.h>

// Two raw libffi closures per signature, made with the same cif. The libffi floor: a handler
// that calls the original with ffi_call. The closure limit: a handler that reads the
// arguments libffi hands it, calls the original through a typed function pointer and stores
// the result as libffi expects, nothing else; no hook built on a libffi closure can do less.

static ffi_type *hb_point_members[] = { &ffi_type_double, &ffi_type_double, NULL };
static ffi_type hb_point_type = { sizeof(hb_point), _Alignof(hb_point), FFI_TYPE_STRUCT, hb_point_members };

static ffi_type *hb_record_members[] = {
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, NULL,
};
static ffi_type hb_record_type = { sizeof(hb_record), _Alignof(hb_record), FFI_TYPE_STRUCT, hb_record_members };

static ffi_type *hb_int_int_arguments[] = { &ffi_type_sint, &ffi_type_sint };
static ffi_type *hb_double_arguments[] = { &ffi_type_double, &ffi_type_double };
static ffi_type *hb_six_int_arguments[] = {
    &ffi_type_sint, &ffi_type_sint, &ffi_type_sint, &ffi_type_sint, &ffi_type_sint, &ffi_type_sint,
};
static ffi_type *hb_point_arguments[] = { &hb_point_type };
static ffi_type *hb_record_arguments[] = { &hb_record_type };

/// A closure made once for one signature, and the cif it was prepared with.
typedef struct hb_raw_closure {
    ffi_cif cif;
    ffi_closure *closure;
    void *code;
} hb_raw_closure;

/// The libffi-floor closures, by signature.
static hb_raw_closure hb_raw_closures[HB_SIGNATURE_COUNT];

/// The closure-limit closures, by signature.
static hb_raw_closure hb_limit_closures[HB_SIGNATURE_COUNT];

/// The handler of a libffi closure; `original` is its user data.
typedef void (*hb_handler)(ffi_cif *cif, void *result, void **arguments, void *original);

/// The libffi floor's handler: forwards the call to the original with `ffi_call`.
static void hb_forward(ffi_cif *cif, void *result, void **arguments, void *original) {
    ffi_call(cif, FFI_FN(original), result, arguments);
}

// MARK: - Closure-limit handlers
//
// libffi hands a closure handler a pointer to each argument and a buffer for the result,
// into which an integer result narrower than a register goes widened to ffi_arg (signed
// here: every integer result is an int) and anything else as its own type.

/// The closure limit of `int (int, int)`.
static void hb_limit_int_int(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    int value = ((int (*)(int, int))original)(*(int *)arguments[0], *(int *)arguments[1]);
    *(ffi_sarg *)result = value;
}

/// The closure limit of `void (void)`: no result to store.
static void hb_limit_void(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    (void)result;
    (void)arguments;
    ((void (*)(void))original)();
}

/// The closure limit of `double (double, double)`.
static void hb_limit_double(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    *(double *)result = ((double (*)(double, double))original)(*(double *)arguments[0], *(double *)arguments[1]);
}

/// The closure limit of `int (int, int, int, int, int, int)`.
static void hb_limit_six_ints(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    int value = ((int (*)(int, int, int, int, int, int))original)(
        *(int *)arguments[0], *(int *)arguments[1], *(int *)arguments[2], *(int *)arguments[3], *(int *)arguments[4],
        *(int *)arguments[5]);
    *(ffi_sarg *)result = value;
}

/// The closure limit of `double (struct hb_point)`.
static void hb_limit_struct16(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    *(double *)result = ((double (*)(hb_point))original)(*(hb_point *)arguments[0]);
}

/// The closure limit of `struct hb_record (struct hb_record)`: the result buffer is the
/// caller's return memory.
static void hb_limit_struct40(ffi_cif *cif, void *result, void **arguments, void *original) {
    (void)cif;
    *(hb_record *)result = ((hb_record (*)(hb_record))original)(*(hb_record *)arguments[0]);
}

/// The closure-limit handlers, by signature.
static const hb_handler hb_limit_handlers[HB_SIGNATURE_COUNT] = {
    hb_limit_int_int, hb_limit_void, hb_limit_double, hb_limit_six_ints, hb_limit_struct16, hb_limit_struct40,
};

// MARK: - Installing

static ffi_status hb_prepare_cif(hb_signature signature, ffi_cif *cif) {
    switch (signature) {
    case HB_INT_INT: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 2, &ffi_type_sint, hb_int_int_arguments);
    case HB_VOID: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 0, &ffi_type_void, NULL);
    case HB_DOUBLE: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 2, &ffi_type_double, hb_double_arguments);
    case HB_SIX_INTS: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 6, &ffi_type_sint, hb_six_int_arguments);
    case HB_STRUCT16: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 1, &ffi_type_double, hb_point_arguments);
    case HB_STRUCT40: return ffi_prep_cif(cif, FFI_DEFAULT_ABI, 1, &hb_record_type, hb_record_arguments);
    default: return FFI_BAD_TYPEDEF;
    }
}

/// Makes the closure of `signature` in `closures` on first use, with `handler` and the
/// original as its user data, and puts it in the slot. Returns 0, or -1 when libffi cannot.
static int hb_closure_install(hb_raw_closure *closures, hb_signature signature, hb_handler handler) {
    if (signature < 0 || signature >= HB_SIGNATURE_COUNT) return -1;
    hb_raw_closure *raw = &closures[signature];
    if (raw->closure == NULL) {
        if (hb_prepare_cif(signature, &raw->cif) != FFI_OK) return -1;
        void *code = NULL;
        ffi_closure *closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
        if (closure == NULL) return -1;
        if (ffi_prep_closure_loc(closure, &raw->cif, handler, hb_original(signature), code) != FFI_OK) {
            ffi_closure_free(closure);
            return -1;
        }
        raw->closure = closure;
        raw->code = code;
    }
    __atomic_store_n(hb_slot(signature), raw->code, __ATOMIC_RELEASE);
    return 0;
}

int hb_raw_closure_install(hb_signature signature) { return hb_closure_install(hb_raw_closures, signature, hb_forward); }

int hb_closure_limit_install(hb_signature signature) {
    if (signature < 0 || signature >= HB_SIGNATURE_COUNT) return -1;
    return hb_closure_install(hb_limit_closures, signature, hb_limit_handlers[signature]);
}
