// A library that libBareNameFixture.so links with, and nothing else loads: its symbol is found
// by the other's dlsym(RTLD_NEXT) only when the loader sees libBareNameFixture.so as the caller.
int cnext_value(void) { return 53; }
