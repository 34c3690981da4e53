/* The hooking library's ffh_call_through (hidden here as there), for this library's dlopen and
   dlmopen: see its file. */
#include "../../../Sources/CFFIHookSupport/call_through_x86_64.S"
