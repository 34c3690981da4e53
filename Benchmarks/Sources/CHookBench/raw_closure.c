#include "CHookBench.h"

#include <ffi.h>
#include <stddef.h>

// The libffi floor: a closure whose handler calls the original with ffi_call, nothing else.

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

typedef struct hb_raw_closure {
    ffi_cif cif;
    ffi_closure *closure;
    void *code;
} hb_raw_closure;

static hb_raw_closure hb_raw_closures[HB_SIGNATURE_COUNT];

static void hb_forward(ffi_cif *cif, void *result, void **arguments, void *original) {
    ffi_call(cif, FFI_FN(original), result, arguments);
}

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

int hb_raw_closure_install(hb_signature signature) {
    if (signature < 0 || signature >= HB_SIGNATURE_COUNT) return -1;
    hb_raw_closure *raw = &hb_raw_closures[signature];
    if (raw->closure == NULL) {
        if (hb_prepare_cif(signature, &raw->cif) != FFI_OK) return -1;
        void *code = NULL;
        ffi_closure *closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
        if (closure == NULL) return -1;
        if (ffi_prep_closure_loc(closure, &raw->cif, hb_forward, hb_original(signature), code) != FFI_OK) {
            ffi_closure_free(closure);
            return -1;
        }
        raw->closure = closure;
        raw->code = code;
    }
    __atomic_store_n(hb_slot(signature), raw->code, __ATOMIC_RELEASE);
    return 0;
}
