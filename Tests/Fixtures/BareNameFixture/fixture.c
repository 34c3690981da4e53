// A library that only the tests of calls of dlopen by bare name load: libImportFixture.so,
// whose DT_RUNPATH is its own directory ($ORIGIN), opens it as "libBareNameFixture.so", which
// the loader finds there only if it sees that libImportFixture.so called it.
int cbarename_value(void) { return 31; }
